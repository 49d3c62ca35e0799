package lane

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/lanes-qos/lanes/autorate"
	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/hostcpu"
	"github.com/lanes-qos/lanes/internal/rate"
	"github.com/lanes-qos/lanes/reserve"
)

//go:embed default.toml
var defaultTOML []byte

// EmbeddedSource is the Source of the built-in configuration.
const EmbeddedSource = "<embedded>"

var (
	defaultOnce sync.Once
	defaultCfg  *Config
)

// Default returns the embedded default configuration: the three built-in
// lanes and no rules. Each call returns a fresh copy that the caller may
// modify.
func Default() *Config {
	defaultOnce.Do(func() {
		c, err := parse(EmbeddedSource, defaultTOML, nil)
		if err != nil {
			panic("lane: embedded default.toml is invalid: " + err.Error())
		}
		defaultCfg = c
	})
	return defaultCfg.Clone()
}

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	n := *c
	n.Lanes = make(map[string]*Lane, len(c.Lanes))
	for name, l := range c.Lanes {
		cp := *l
		cp.Net.Ports = slices.Clone(l.Net.Ports)
		n.Lanes[name] = &cp
	}
	n.Order = slices.Clone(c.Order)
	n.Rules = slices.Clone(c.Rules)
	n.Net.Interfaces = slices.Clone(c.Net.Interfaces)
	n.DiskIdle.Devices = slices.Clone(c.DiskIdle.Devices)
	n.Bridge = c.Bridge.clone()
	n.Controllers = slices.Clone(c.Controllers)
	for i := range n.Controllers {
		n.Controllers[i].Actuators = slices.Clone(c.Controllers[i].Actuators)
	}
	n.Events.HistoryTopics = slices.Clone(c.Events.HistoryTopics)
	n.Monitor.Thresholds = slices.Clone(c.Monitor.Thresholds)
	return &n
}

// Load reads and parses the config file at path (see Parse).
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return Parse(path, data)
}

// Parse parses a TOML config file and merges it over the embedded
// defaults: the built-in lanes keep their default value for every key the
// file does not set; user lanes start from the built-in normal lane with
// unprivileged = false. source names the file in error messages.
//
// All problems are reported at once, joined with errors.Join; each is a
// *FieldError naming source, line and key.
func Parse(source string, data []byte) (*Config, error) {
	return parse(source, data, Default())
}

// FieldError is a problem at one key of a config file.
type FieldError struct {
	Source string // file name, or "<embedded>"
	Line   int    // 1-based; 0 when unknown
	Key    string // dotted key, e.g. "lanes.video.cpu.cap" or "rule[2].lane"; may be empty
	Msg    string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Lane returns the lane called name.
func (c *Config) Lane(name string) (*Lane, error) {
	if l, ok := c.Lanes[name]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("unknown lane %q (lanes: %s)", name, strings.Join(c.Order, ", "))
}

// The file schema. Pointers tell a key that was not given from a zero value.
type fileConfig struct {
	Default *string              `toml:"default"`
	Daemon  *fileDaemon          `toml:"daemon"`
	Net     *fileNetGlobal       `toml:"net"`
	Disk    *fileDiskGlobal      `toml:"disk"`
	Lanes   map[string]*fileLane `toml:"lanes"`
	Rule    []fileRule           `toml:"rule,omitempty"`
	Bridge  *fileBridge          `toml:"bridge"`
	// Controller: see controller.go.
	Controller []fileController `toml:"controller,omitempty"`
	Events     *fileEvents      `toml:"events"`
	Monitor    *fileMonitor     `toml:"monitor"`
}

type fileDaemon struct {
	Socket    *string `toml:"socket"`
	StateDir  *string `toml:"state_dir"`
	SocketGID *int    `toml:"socket_gid"`
	Metrics   *string `toml:"metrics"`
}

type fileNetGlobal struct {
	Interfaces  []string     `toml:"interfaces"`
	Rate        *string      `toml:"rate"`
	Ingress     *bool        `toml:"ingress"`
	RxWindow    *float64     `toml:"receive_window"`
	Classifier  *string      `toml:"classifier"`
	ReplaceRoot *bool        `toml:"replace_root"`
	Idletime    *fileNetIdle `toml:"idletime"`
	Ledbat      *fileLedbat  `toml:"ledbat"`
	Auto        *fileNetAuto `toml:"auto"`
}

type fileNetAuto struct {
	Upload    *string `toml:"upload"`
	Download  *string `toml:"download"`
	Reflector *string `toml:"reflector"`
	Interval  *string `toml:"interval"`
	Threshold *string `toml:"threshold"`
	Probe     *string `toml:"probe"`
	Delivery  *bool   `toml:"delivery"`
	Law       *string `toml:"law"`
	Target    *string `toml:"target"`
}

type fileLedbat struct {
	Target *string `toml:"target"`
}

type filePI struct {
	PI    *string  `toml:"pi"`
	PIMin *string  `toml:"pi_min"`
	PIMax *string  `toml:"pi_max"`
	PIK   *float64 `toml:"pi_k"`
}

type fileNetIdle struct {
	filePI
	Mark   *bool   `toml:"mark"`
	Follow *bool   `toml:"follow"`
	PIRTT  *string `toml:"pi_rtt"`
}

type fileDiskGlobal struct {
	Idletime *fileDiskIdle `toml:"idletime"`
}

type fileDiskIdle struct {
	filePI
	Devices []string `toml:"devices"`
}

type fileLane struct {
	Unprivileged *bool        `toml:"unprivileged"`
	CPU          *fileCPU     `toml:"cpu"`
	Disk         *fileDisk    `toml:"disk"`
	Net          *fileLaneNet `toml:"net"`
	Boost        *fileBoost   `toml:"boost"`
}

type fileCPU struct {
	Weight *int     `toml:"weight"`
	Idle   *bool    `toml:"idle"`
	Cap    *float64 `toml:"cap"`
	// CapPeriod is the cap's enforcement period ("20ms"): how long the
	// lane may be held once it has used its quota.
	CapPeriod *string `toml:"cap_period"`
	// Reserve is "N%": N percent of one CPU (seed 001's reservation).
	Reserve *string `toml:"reserve"`
	// SendRate is a rate ("20mbit") the lane's send rate is held at by
	// its CPU share (seed 001's rate by execution speed).
	SendRate *string `toml:"send_rate"`
}

type fileDisk struct {
	Class  *string `toml:"class"`
	Level  *int    `toml:"level"`
	Weight *int    `toml:"weight"`
}

type fileLaneNet struct {
	Priority *int    `toml:"priority"`
	Rate     *string `toml:"rate"`
	Ceil     *string `toml:"ceil"`
	Borrow   *bool   `toml:"borrow"`
	Target   *string `toml:"target"`
	Idletime *bool   `toml:"idletime"`
	Preempts *bool   `toml:"preempts"`
	Ports    []any   `toml:"ports"`
	CC       *string `toml:"cc"`
}

type fileRule struct {
	Lane   *string `toml:"lane"`
	Exe    *string `toml:"exe"`
	Comm   *string `toml:"comm"`
	User   *string `toml:"user"`
	Cgroup *string `toml:"cgroup"`
	Unit   *string `toml:"unit"`
}

var laneNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)

// validator collects errors with their positions.
type validator struct {
	source string
	pos    keyPositions
	errs   []error
	warns  []*FieldError
	// shaping lists the keys the file set that only the shaper uses
	// (a lane's net.rate, ceil, priority, ...): without [net] rate they
	// do nothing, which is a warning.
	shaping []string
}

func (v *validator) add(key, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Source: v.source, Line: v.pos.line(key), Key: key, Msg: fmt.Sprintf(format, args...)})
}

// warn records what the config says that does not do what it reads as:
// it loads, and lanes config check, lanesd's log and lanes status say so.
func (v *validator) warn(key, format string, args ...any) {
	v.warns = append(v.warns, &FieldError{Source: v.source, Line: v.pos.line(key), Key: key, Msg: fmt.Sprintf(format, args...)})
}

// parseRate parses a rate at key, warning when it is written in bytes
// per second ("20Mbps" is 160 Mbit/s).
func (v *validator) parseRate(key, s string) (uint64, error) {
	r, err := ParseRate(s)
	if err == nil {
		if note := rate.ByteUnitNote(s); note != "" {
			v.warn(key, "%s", note)
		}
	}
	return r, err
}

// utf8BOM is the byte-order mark some Windows editors put at the start of
// a UTF-8 file; TOML does not allow it, lanes skips it.
var utf8BOM = []byte("\xef\xbb\xbf")

// parse decodes data and merges it over base (nil: no base, data must be
// complete, as the embedded defaults are).
func parse(source string, data []byte, base *Config) (*Config, error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	v := &validator{source: source, pos: indexKeys(data)}
	var f fileConfig
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		var strictErr *toml.StrictMissingError
		if !errors.As(err, &strictErr) {
			// Syntax or type error: the decode stopped, nothing more to check.
			return nil, decodeError(source, err, v.pos)
		}
		for i := range strictErr.Errors {
			de := &strictErr.Errors[i]
			line, col := de.Position()
			key := v.pos.exactKey(line, col)
			if key == "" {
				key = displayKey(de.Key())
			}
			v.errs = append(v.errs, &FieldError{Source: source, Line: line, Key: key, Msg: "unknown key"})
		}
	}

	c := &Config{Source: source, Default: Normal, Lanes: map[string]*Lane{}}
	var userBase Lane
	if base != nil {
		c.Daemon = base.Daemon
		c.Net = base.Net
		c.Net.Interfaces = slices.Clone(base.Net.Interfaces)
		c.DiskIdle = base.DiskIdle
		c.DiskIdle.Devices = slices.Clone(base.DiskIdle.Devices)
		c.Bridge = base.Bridge.clone()
		c.Events = base.Events
		c.Events.HistoryTopics = slices.Clone(base.Events.HistoryTopics)
		c.Monitor = base.Monitor
		c.Monitor.Thresholds = slices.Clone(base.Monitor.Thresholds)
		c.Default = base.Default
		for _, name := range []string{Interactive, Normal, Background} {
			l := *base.Lanes[name]
			l.Line = 0
			c.Lanes[name] = &l
		}
		userBase = *base.Lanes[Normal]
	}
	userBase.Unprivileged = false
	userBase.Line = 0

	if f.Default != nil {
		c.Default = *f.Default
	}
	v.daemon(&c.Daemon, f.Daemon)
	v.netGlobal(&c.Net, f.Net)
	v.events(&c.Events, f.Events)
	if f.Disk != nil && f.Disk.Idletime != nil {
		v.diskIdle(&c.DiskIdle, f.Disk.Idletime)
	}
	v.bridge(&c.Bridge, f.Bridge)

	// Built-ins first, then user lanes in file order.
	c.Order = []string{Interactive, Normal, Background}
	var user []string
	for name := range f.Lanes {
		if !slices.Contains(c.Order, name) {
			user = append(user, name)
		}
	}
	sort.Slice(user, func(i, j int) bool {
		oi, oj := v.pos.offset("lanes."+user[i]), v.pos.offset("lanes."+user[j])
		if oi != oj {
			return oi < oj
		}
		return user[i] < user[j]
	})
	c.Order = append(c.Order, user...)
	for _, name := range c.Order {
		fl := f.Lanes[name]
		l, ok := c.Lanes[name]
		if !ok {
			if base == nil && fl == nil {
				v.add("lanes."+name, "built-in lane missing")
				continue
			}
			cp := userBase
			l = &cp
			c.Lanes[name] = l
		}
		l.Name = name
		key := "lanes." + name
		if fl != nil && base != nil { // built-in defaults have line 0
			l.Line = v.pos.line(key)
		}
		if !laneNameRE.MatchString(name) {
			v.add(key, "invalid lane name %q: want a lowercase letter, then up to 30 lowercase letters, digits or '-'", name)
		}
		v.lane(key, l, fl)
	}
	v.laneRates(c)
	v.lanePorts(c)

	if l, ok := c.Lanes[c.Default]; !ok {
		v.add("default", "unknown lane %q (lanes: %s)", c.Default, strings.Join(c.Order, ", "))
	} else if l.Net.Quiet && !l.Net.Idletime {
		v.add("lanes."+c.Default+".net.preempts", "the default lane's packets always preempt: lanes cannot tell them from unclassified traffic (make another lane quiet, or change default)")
	}
	v.monitor(c, f.Monitor)
	if v.pos.tables["rule"] {
		v.add("rule", "write rules as [[rule]], an array of tables")
	}
	for i := range f.Rule {
		if r, ok := v.rule(c, i, &f.Rule[i]); ok {
			c.Rules = append(c.Rules, r)
		}
	}
	v.controllers(c, f.Controller)
	if c.Net.Rate == 0 && c.Net.Auto == nil && base != nil { // the embedded defaults set them for when a rate is given
		for _, k := range v.shaping {
			v.warn(k, "does nothing: no interface is shaped without [net] rate (set it a little below the link's rate, or to \"auto\"); without it a lane's network setting is its net.cc and marking only")
		}
	}
	if len(v.errs) > 0 {
		slices.SortStableFunc(v.errs, func(a, b error) int {
			return lineOf(a) - lineOf(b)
		})
		return nil, errors.Join(v.errs...)
	}
	slices.SortStableFunc(v.warns, func(a, b *FieldError) int { return a.Line - b.Line })
	for _, w := range v.warns {
		c.Warnings = append(c.Warnings, w.Error())
	}
	return c, nil
}

func (v *validator) daemon(d *Daemon, fd *fileDaemon) {
	if fd == nil {
		return
	}
	if fd.Socket != nil {
		d.Socket = *fd.Socket
		if !strings.HasPrefix(d.Socket, "/") {
			v.add("daemon.socket", "%q is not an absolute path", d.Socket)
		}
	}
	if fd.StateDir != nil {
		d.StateDir = *fd.StateDir
		if !strings.HasPrefix(d.StateDir, "/") {
			v.add("daemon.state_dir", "%q is not an absolute path", d.StateDir)
		}
	}
	if fd.SocketGID != nil {
		d.SocketGID = *fd.SocketGID
		if d.SocketGID < -1 || int64(d.SocketGID) > 1<<32-2 {
			v.add("daemon.socket_gid", "%d is not a group id (or -1 for none)", d.SocketGID)
		}
	}
	if fd.Metrics != nil {
		d.Metrics = *fd.Metrics
		if err := checkMetricsAddr(d.Metrics); err != nil {
			v.add("daemon.metrics", "%q: %v", d.Metrics, err)
		}
	}
}

// checkMetricsAddr accepts "" (off), "unix:/absolute/path" and
// "host:port" with a numeric port (1..65535; the host may be empty for
// every address).
func checkMetricsAddr(a string) error {
	if a == "" {
		return nil
	}
	if path, ok := strings.CutPrefix(a, "unix:"); ok {
		if !strings.HasPrefix(path, "/") {
			return errors.New("a Unix socket needs an absolute path (unix:/run/lanes/metrics.sock)")
		}
		return nil
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return errors.New("not host:port (127.0.0.1:9469) or unix:/path")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	if host != "" && net.ParseIP(host) == nil && host != "localhost" {
		return fmt.Errorf("host %q is not an IP address or localhost", host)
	}
	return nil
}

func (v *validator) netGlobal(n *NetGlobal, fn *fileNetGlobal) {
	if fn == nil {
		return
	}
	if fn.Interfaces != nil {
		n.Interfaces = slices.Clone(fn.Interfaces)
		for _, name := range n.Interfaces {
			if name == "" || len(name) > 15 || strings.ContainsAny(name, "/ \t\n:") {
				v.add("net.interfaces", "%q is not an interface name", name)
			}
		}
	}
	if fn.Rate != nil {
		if *fn.Rate == "auto" {
			n.Auto = v.netAuto(n, fn.Auto, fn.Ingress != nil && *fn.Ingress)
		} else {
			r, err := v.parseRate("net.rate", *fn.Rate)
			if err != nil {
				v.add("net.rate", "%v (or \"auto\")", err)
			}
			n.Rate = r
		}
	}
	if fn.Auto != nil && n.Auto == nil {
		v.add("net.auto", "set [net] rate = \"auto\" for the rate to follow the link")
	}
	if fn.Ingress != nil {
		n.Ingress = *fn.Ingress
	}
	if fn.RxWindow != nil {
		switch g := *fn.RxWindow; {
		case g == 0:
			n.RxWindow = 0
		case g >= 1 && g <= 16:
			n.RxWindow = g
		default:
			v.add("net.receive_window", "%g is outside 1..16 (0: off): it multiplies a download's bandwidth-delay product, and below 1 a lone download could not fill the link", g)
		}
	}
	if fn.Classifier != nil {
		switch *fn.Classifier {
		case "auto", "ports":
			n.Classifier = *fn.Classifier
		default:
			v.add("net.classifier", "unknown classifier %q (want \"auto\" or \"ports\")", *fn.Classifier)
		}
	}
	if fn.ReplaceRoot != nil {
		n.ReplaceRoot = *fn.ReplaceRoot
	}
	if fl := fn.Ledbat; fl != nil && fl.Target != nil {
		d, err := time.ParseDuration(*fl.Target)
		switch {
		case err != nil:
			v.add("net.ledbat.target", "invalid duration %q: want e.g. \"25ms\"", *fl.Target)
		case d < MinLedbatTarget || d > MaxLedbatTarget:
			v.add("net.ledbat.target", "%v is outside %v..%v (RFC 6817: at most 100 ms)", d, MinLedbatTarget, MaxLedbatTarget)
		default:
			n.LedbatTarget = d
		}
	}
	if fi := fn.Idletime; fi != nil {
		v.pi("net.idletime", &n.Idle.PI, &fi.filePI)
		if fi.Mark != nil {
			n.Idle.Mark = *fi.Mark
		}
		if fi.Follow != nil {
			n.Idle.Follow = *fi.Follow
		}
		if fi.PIRTT != nil {
			switch *fi.PIRTT {
			case RTTMin, RTTSmoothed:
				n.Idle.RTT = *fi.PIRTT
			default:
				v.add("net.idletime.pi_rtt", "unknown RTT %q (want %q or %q)", *fi.PIRTT, RTTMin, RTTSmoothed)
			}
		}
	}
}

// netAuto reads [net.auto] for rate = "auto": the rates' ranges, the
// reflector and the controller's period and threshold. n.Rate becomes the
// larger of the ranges' maxima, at which the trees are built (each
// direction then starts at its own maximum). A download range needs
// download shaping (ingress).
func (v *validator) netAuto(n *NetGlobal, fa *fileNetAuto, ingress bool) *AutoRate {
	a := &AutoRate{Interval: DefaultAutoInterval, Probe: ProbeTimestamp, Delivery: true, Law: autorate.Config{Threshold: autorate.Defaults.Threshold}}
	switch {
	case fa == nil:
		v.add("net.rate", "\"auto\" needs a [net.auto] table with upload (the rate's range) and reflector")
		return a
	case fa.Upload == nil:
		v.add("net.auto", "rate = \"auto\" needs upload, the upload rate's range, e.g. upload = \"1mbit..20mbit\"")
	default:
		if lo, hi, ok := v.rateRange("net.auto.upload", *fa.Upload); ok {
			a.Law.Min[autorate.Egress], a.Law.Max[autorate.Egress] = lo, hi
			n.Rate = hi
		}
	}
	if fa.Download != nil {
		if !ingress {
			v.add("net.auto.download", "the download rate follows the link only where lanes shapes downloads: set [net] ingress = true, or leave download out")
		} else if lo, hi, ok := v.rateRange("net.auto.download", *fa.Download); ok {
			a.Law.Min[autorate.Ingress], a.Law.Max[autorate.Ingress] = lo, hi
			n.Rate = max(n.Rate, hi)
		}
	}
	if fa.Reflector == nil {
		v.add("net.auto", "rate = \"auto\" needs reflector: an address beyond the bottleneck that answers ICMP timestamps or ping (e.g. your provider's first router)")
	} else if addr, err := netip.ParseAddr(*fa.Reflector); err != nil {
		v.add("net.auto.reflector", "%q is not an IP address", *fa.Reflector)
	} else if addr = addr.Unmap(); addr.IsUnspecified() || addr.IsLoopback() || addr.IsMulticast() || addr.Zone() != "" {
		v.add("net.auto.reflector", "%s cannot be a reflector: want a unicast address beyond the link", addr)
	} else {
		a.Reflector = addr
	}
	if fa.Interval != nil {
		if d, ok := v.duration("net.auto.interval", *fa.Interval, MinAutoInterval, MaxAutoInterval); ok {
			a.Interval = d
		}
	}
	if fa.Threshold != nil {
		if d, ok := v.duration("net.auto.threshold", *fa.Threshold, time.Millisecond, 500*time.Millisecond); ok {
			a.Law.Threshold = d
		}
	}
	if fa.Probe != nil {
		switch *fa.Probe {
		case ProbeTimestamp, ProbeEcho:
			a.Probe = *fa.Probe
		default:
			v.add("net.auto.probe", "%q is not a probe: want %q (one-way delays where the reflector answers ICMP timestamps, the default) or %q (round trips)", *fa.Probe, ProbeTimestamp, ProbeEcho)
		}
	}
	if fa.Delivery != nil {
		a.Delivery = *fa.Delivery
	}
	if fa.Law != nil {
		switch *fa.Law {
		case AutoLawCeiling:
		case AutoLawFollow:
			a.Law.Follow, a.Law.Target = true, autorate.Defaults.Target
			if !a.Delivery {
				v.add("net.auto.law", "%q follows what the upload's TCP connections deliver: it needs delivery = true", AutoLawFollow)
			}
		default:
			v.add("net.auto.law", "%q is not a law: want %q (the probes' delays, creeping up to the rate where the last queue began; the default) or %q (the upload's delivery rate, held to a small queue: links whose rate swings within a second, such as cellular ones)", *fa.Law, AutoLawCeiling, AutoLawFollow)
		}
	}
	if fa.Target != nil {
		if !a.Law.Follow {
			v.add("net.auto.target", "the queue target is the follow law's: set law = %q, or leave target out", AutoLawFollow)
		} else if d, ok := v.duration("net.auto.target", *fa.Target, autorate.MinTarget, autorate.MaxTarget); ok {
			a.Law.Target = d
		}
	}
	if a.Law.Follow && fa.Interval == nil {
		a.Interval = autorate.FollowInterval
	}
	a.Law.Interval = a.Interval
	if len(n.Interfaces) > 1 {
		v.add("net.interfaces", "rate = \"auto\" follows one link: name at most one interface")
	}
	if a.Law.Max[autorate.Egress] != 0 && a.Reflector.IsValid() {
		if err := a.Law.Check(); err != nil {
			v.add("net.auto", "%v", err)
		}
	}
	return a
}

// rateRange parses "min..max" (two rates, min at most max, min at least
// 8kbit).
func (v *validator) rateRange(key, s string) (lo, hi uint64, ok bool) {
	a, b, found := strings.Cut(s, "..")
	if !found {
		v.add(key, "%q is not a range: want min..max, e.g. \"1mbit..20mbit\"", s)
		return 0, 0, false
	}
	lo, err1 := v.parseRate(key, strings.TrimSpace(a))
	hi, err2 := v.parseRate(key, strings.TrimSpace(b))
	switch {
	case err1 != nil:
		v.add(key, "minimum: %v", err1)
	case err2 != nil:
		v.add(key, "maximum: %v", err2)
	case lo < MinAutoRate:
		v.add(key, "minimum %s is below %s", FormatRate(lo), FormatRate(MinAutoRate))
	case lo > hi:
		v.add(key, "minimum %s is above maximum %s", FormatRate(lo), FormatRate(hi))
	default:
		return lo, hi, true
	}
	return 0, 0, false
}

// duration parses a duration within lo..hi.
func (v *validator) duration(key, s string, lo, hi time.Duration) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		v.add(key, "invalid duration %q: want e.g. \"100ms\"", s)
	case d < lo || d > hi:
		v.add(key, "%v is outside %v..%v", d, lo, hi)
	default:
		return d, true
	}
	return 0, false
}

func (v *validator) diskIdle(d *DiskIdletime, fd *fileDiskIdle) {
	v.pi("disk.idletime", &d.PI, &fd.filePI)
	if d.PI.Mode == idletime.Auto {
		v.add("disk.idletime.pi", "\"auto\" derives the interval from network round-trip times; for a disk give a duration or \"adaptive\"")
	}
	if fd.Devices != nil {
		d.Devices = slices.Clone(fd.Devices)
		d.DevicesLine = v.pos.line("disk.idletime.devices")
		for _, dev := range d.Devices {
			if !strings.HasPrefix(dev, "/dev/") || strings.ContainsAny(dev, " \t\n") {
				v.add("disk.idletime.devices", "%q is not a block device path (want e.g. \"/dev/sda\")", dev)
			}
		}
	}
	if !d.PI.Off() && len(d.Devices) == 0 {
		v.add("disk.idletime.devices", "name the block devices to hold background I/O on (e.g. [\"/dev/sda\"]) when pi is set")
	}
}

// CheckHost checks what the config names on this host, which Parse does
// not (a file may be checked on another machine): each disk.idletime
// device exists and is a block device, and each cap with its own period
// gives at least the kernel's least quota on this host's CPUs. The errors name the file and line,
// as Parse's do.
func (c *Config) CheckHost() error {
	var errs []error
	ncpu := hostcpu.Online()
	for _, name := range c.Order {
		l := c.Lanes[name]
		if err := CheckCapPeriod(l.CPU, ncpu); err != nil {
			errs = append(errs, &FieldError{Source: c.Source, Line: l.Line, Key: "lanes." + name + ".cpu.cap_period", Msg: err.Error()})
		}
	}
	for _, dev := range c.DiskIdle.Devices {
		fi, err := os.Stat(dev)
		var msg string
		switch {
		case errors.Is(err, fs.ErrNotExist):
			msg = "no such device on this host"
		case err != nil:
			msg = err.Error()
		case fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0:
			msg = "not a block device"
		default:
			continue
		}
		errs = append(errs, &FieldError{Source: c.Source, Line: c.DiskIdle.DevicesLine, Key: "disk.idletime.devices", Msg: fmt.Sprintf("%s: %s", dev, msg)})
	}
	if reqs := c.Reservations(); len(reqs) > 0 {
		share, err := hostcpu.RTShare()
		if err != nil {
			share = reserve.Headroom
		}
		if err := c.CheckReservations(hostcpu.Online(), min(share, reserve.Headroom)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Reservations are the lanes' CPU reservations, in lane order.
func (c *Config) Reservations() []reserve.Request {
	var out []reserve.Request
	for _, name := range c.Order {
		if r := c.Lanes[name].CPU.ReservePercent; r > 0 {
			out = append(out, reserve.Request{Lane: name, Percent: r})
		}
	}
	return out
}

// CheckReservations is the admission control of the lanes' reservations
// on a host of ncpu CPUs of which reservations may take share each
// (reserve.Admit), and of a cap below a lane's own reservation. The error
// names the key and the config line.
func (c *Config) CheckReservations(ncpu int, share float64) error {
	var errs []error
	at := func(key, name string, err error) {
		errs = append(errs, &FieldError{Source: c.Source, Line: c.Lanes[name].Line, Key: key, Msg: err.Error()})
	}
	reqs := c.Reservations()
	for _, r := range reqs {
		l := c.Lanes[r.Lane]
		if l.CPU.CapPercent > 0 && l.CPU.CapPercent/100*float64(ncpu)*100 < r.Percent {
			at("lanes."+r.Lane+".cpu.cap", r.Lane, fmt.Errorf("%g%% of this host's %d CPUs is less than the lane's cpu.reserve %s", l.CPU.CapPercent, ncpu, FormatReserve(r.Percent, 0)))
		}
	}
	if err := reserve.Admit(reqs, ncpu, share); err != nil {
		name := reqs[0].Lane
		if k, _, ok := strings.Cut(strings.TrimPrefix(err.Error(), "lanes."), ".cpu.reserve: "); ok && c.Lanes[k] != nil {
			name = k
		}
		errs = append(errs, &FieldError{Source: c.Source, Line: c.Lanes[name].Line, Msg: err.Error()})
	}
	return errors.Join(errs...)
}

// ParsePI parses a preemption interval as config files write it: "off"
// (or "0"), a duration ("20ms"), "inf", "auto" or "adaptive"; case and
// surrounding space are ignored. It returns the policy's Mode and, for
// idletime.Fixed, its PI ("off" is a fixed PI of 0, idletime.Infinite is
// "inf"); the other fields are left zero.
func ParsePI(s string) (idletime.Policy, error) {
	switch t := strings.ToLower(strings.TrimSpace(s)); t {
	case "off":
		return idletime.Policy{Mode: idletime.Fixed}, nil
	case "inf", "infinite":
		return idletime.Policy{Mode: idletime.Fixed, PI: idletime.Infinite}, nil
	case "auto":
		return idletime.Policy{Mode: idletime.Auto}, nil
	case "adaptive":
		return idletime.Policy{Mode: idletime.Adaptive}, nil
	default:
		d, err := time.ParseDuration(t)
		switch {
		case err != nil:
			return idletime.Policy{}, fmt.Errorf(`PI %q: want a duration such as "20ms", "inf", "auto", "adaptive" or "off"`, s)
		case d < 0:
			return idletime.Policy{}, fmt.Errorf("PI %q is negative", s)
		}
		return idletime.Policy{Mode: idletime.Fixed, PI: d}, nil
	}
}

// pi merges and checks one preemption-interval setting under key.
func (v *validator) pi(key string, p *idletime.Policy, fp *filePI) {
	if fp.PI != nil {
		parsed, err := ParsePI(*fp.PI)
		if err != nil {
			v.add(key+".pi", "%v", err)
		} else {
			p.Mode, p.PI = parsed.Mode, parsed.PI
		}
	}
	dur := func(k string, s *string, dst *time.Duration) bool {
		if s == nil {
			return true
		}
		d, err := time.ParseDuration(*s)
		switch {
		case err != nil:
			v.add(key+"."+k, "invalid duration %q: want e.g. \"2ms\"", *s)
			return false
		case d <= 0:
			v.add(key+"."+k, "%s is not positive", d)
			return false
		}
		*dst = d
		return true
	}
	okMin := dur("pi_min", fp.PIMin, &p.Min)
	okMax := dur("pi_max", fp.PIMax, &p.Max)
	if okMin && okMax && p.Min > p.Max {
		v.add(key+".pi_max", "%s is less than pi_min %s", p.Max, p.Min)
	}
	if fp.PIK != nil {
		p.K = *fp.PIK
		if !(p.K > 0 && p.K <= 1000) {
			v.add(key+".pi_k", "%g is outside (0, 1000]", p.K)
		}
	}
}

func (v *validator) lane(key string, l *Lane, fl *fileLane) {
	if fl == nil {
		return
	}
	if fl.Unprivileged != nil {
		l.Unprivileged = *fl.Unprivileged
	}
	if fl.Boost != nil {
		if p, ok := v.boostPolicy(key+".boost", fl.Boost); ok {
			l.Boost = p
		}
	}
	if c := fl.CPU; c != nil {
		if c.Weight != nil {
			l.CPU.Weight = *c.Weight
			if l.CPU.Weight < 1 || l.CPU.Weight > 10000 {
				v.add(key+".cpu.weight", "%d is outside 1..10000", l.CPU.Weight)
			}
		}
		if c.Idle != nil {
			l.CPU.Idle = *c.Idle
		}
		if c.Cap != nil {
			l.CPU.CapPercent = *c.Cap
			if !(l.CPU.CapPercent > 0 && l.CPU.CapPercent <= 100) {
				v.add(key+".cpu.cap", "%g is outside (0, 100]", l.CPU.CapPercent)
			}
		}
		if c.CapPeriod != nil {
			d, err := time.ParseDuration(strings.TrimSpace(*c.CapPeriod))
			switch {
			case err != nil:
				v.add(key+".cpu.cap_period", "%q is not a duration (want e.g. \"20ms\")", *c.CapPeriod)
			case d < MinCapPeriod || d > MaxCapPeriod:
				v.add(key+".cpu.cap_period", "%v is outside %v..%v", d, MinCapPeriod, MaxCapPeriod)
			case d%time.Microsecond != 0:
				v.add(key+".cpu.cap_period", "%v: the kernel counts the period in whole microseconds", d)
			case c.Cap == nil:
				v.add(key+".cpu.cap_period", "a period without cpu.cap: set the cap it enforces")
			default:
				l.CPU.CapPeriod = d
			}
		}
		if c.Reserve != nil {
			r, period, err := ParseReserve(*c.Reserve)
			if err != nil {
				v.add(key+".cpu.reserve", "%v", err)
			}
			l.CPU.ReservePercent, l.CPU.ReservePeriod = r, period
		}
		if l.CPU.ReservePercent > 0 && l.CPU.Idle {
			v.add(key+".cpu.reserve", "a lane with cpu.idle = true cannot hold a reservation (beyond its reservation a reserved lane is idle already)")
		}
		if c.SendRate != nil {
			r, err := v.parseRate(key+".cpu.send_rate", *c.SendRate)
			if err != nil {
				v.add(key+".cpu.send_rate", "%v", err)
			}
			l.CPU.SendRate = r
		}
		switch {
		case l.CPU.SendRate > 0 && l.CPU.Idle:
			v.add(key+".cpu.send_rate", "a lane with cpu.idle = true runs on idle CPU only: its CPU share cannot hold a rate")
		case l.CPU.SendRate > 0 && l.CPU.ReservePercent > 0:
			v.add(key+".cpu.send_rate", "a lane cannot both reserve CPU (cpu.reserve) and have its CPU share moved to hold a rate")
		}
	}
	if d := fl.Disk; d != nil {
		if d.Class != nil {
			switch cl := IOClass(*d.Class); cl {
			case IORealtime, IOBestEffort, IOIdle:
				l.Disk.Class = cl
			case "none":
				l.Disk.Class = IONone
			default:
				v.add(key+".disk.class", "unknown I/O class %q (want realtime, best-effort, idle or none)", *d.Class)
			}
		}
		if d.Level != nil {
			l.Disk.Level = *d.Level
			if l.Disk.Level < 0 || l.Disk.Level > 7 {
				v.add(key+".disk.level", "%d is outside 0..7", l.Disk.Level)
			}
		}
		if d.Weight != nil {
			l.Disk.Weight = *d.Weight
			if l.Disk.Weight < 1 || l.Disk.Weight > 10000 {
				v.add(key+".disk.weight", "%d is outside 1..10000", l.Disk.Weight)
			}
		}
	}
	if n := fl.Net; n != nil {
		for _, k := range []struct {
			name string
			set  bool
		}{{"priority", n.Priority != nil}, {"rate", n.Rate != nil}, {"ceil", n.Ceil != nil}, {"borrow", n.Borrow != nil},
			{"idletime", n.Idletime != nil}, {"preempts", n.Preempts != nil}, {"target", n.Target != nil}} {
			if k.set {
				v.shaping = append(v.shaping, key+".net."+k.name)
			}
		}
		if n.Priority != nil {
			l.Net.Priority = *n.Priority
			if l.Net.Priority < 0 || l.Net.Priority > 7 {
				v.add(key+".net.priority", "%d is outside 0..7", l.Net.Priority)
			}
		}
		rateOK, ceilOK := true, true
		if n.Rate != nil {
			r, err := v.parseRate(key+".net.rate", *n.Rate)
			if err != nil {
				v.add(key+".net.rate", "%v", err)
				rateOK = false
			}
			l.Net.Rate = r
		}
		if n.Ceil != nil {
			r, err := v.parseRate(key+".net.ceil", *n.Ceil)
			if err != nil {
				v.add(key+".net.ceil", "%v", err)
				ceilOK = false
			}
			l.Net.Ceil = r
		}
		if rateOK && ceilOK && l.Net.Ceil != 0 && l.Net.Ceil < l.Net.Rate {
			v.add(key+".net.ceil", "%s is less than rate %s", FormatRate(l.Net.Ceil), FormatRate(l.Net.Rate))
		}
		if n.Borrow != nil {
			l.Net.Borrow = *n.Borrow
		}
		if rateOK && ceilOK && l.Net.Rate != 0 && l.Net.Ceil > l.Net.Rate && !l.Net.Borrow {
			v.add(key+".net.ceil", "%s is above rate %s, but the lane may not borrow and is capped at its rate (set borrow = true, or drop ceil)", FormatRate(l.Net.Ceil), FormatRate(l.Net.Rate))
		}
		if n.Idletime != nil {
			l.Net.Idletime = *n.Idletime
		}
		if n.Preempts != nil {
			l.Net.Quiet = !*n.Preempts
			if *n.Preempts && l.Net.Idletime {
				v.add(key+".net.preempts", "an idletime lane's packets are background: they cannot preempt (set net.idletime = false, or drop preempts)")
			}
		}
		if n.Target != nil {
			d, err := time.ParseDuration(*n.Target)
			switch {
			case err != nil:
				v.add(key+".net.target", "invalid duration %q: want e.g. \"5ms\"", *n.Target)
			case d <= 0:
				v.add(key+".net.target", "%s is not positive", d)
			default:
				l.Net.Target = d
			}
		}
		if n.Ports != nil {
			l.Net.Ports = v.ports(key+".net.ports", n.Ports)
		}
		if n.CC != nil {
			switch *n.CC {
			case "", CCLedbat:
				l.Net.CC = *n.CC
			default:
				v.add(key+".net.cc", "unknown congestion control %q: want \"ledbat\" (lanes' delay-based background transport) or \"\" (the host's default)", *n.CC)
			}
		}
	}
}

// ports parses a lane's net.ports entries; each bad entry is reported at
// its own key ("lanes.video.net.ports[2]"). With a bad entry it returns no
// rules, so that lanePorts does not check a half-parsed list.
func (v *validator) ports(key string, entries []any) []PortRule {
	rules := make([]PortRule, 0, len(entries))
	ok := true
	for i, e := range entries {
		r, err := portRuleOf(e)
		if err != nil {
			v.add(fmt.Sprintf("%s[%d]", key, i+1), "%v", err)
			ok = false
			continue
		}
		rules = append(rules, r)
	}
	if !ok {
		return nil
	}
	return rules
}

// lanePorts rejects port rules of different lanes that overlap: a packet
// could not tell which lane it belongs to.
func (v *validator) lanePorts(c *Config) {
	for i, name := range c.Order {
		l := c.Lanes[name]
		if l == nil {
			continue
		}
		for j, r := range l.Net.Ports {
		earlier:
			for _, prev := range c.Order[:i] {
				pl := c.Lanes[prev]
				if pl == nil {
					continue
				}
				for _, o := range pl.Net.Ports {
					if r.Overlaps(o) {
						v.add(fmt.Sprintf("lanes.%s.net.ports[%d]", name, j+1), "%q overlaps %q of lane %s: a port may be in one lane only", r, o, prev)
						break earlier
					}
				}
			}
		}
	}
}

// laneRates checks the lanes' guaranteed rates against the interface rate.
func (v *validator) laneRates(c *Config) {
	if c.Net.Rate == 0 {
		return
	}
	var sum uint64
	for _, name := range c.Order {
		l := c.Lanes[name]
		if l == nil {
			continue
		}
		if l.Net.Rate > c.Net.Rate {
			v.add("lanes."+name+".net.rate", "%s exceeds net.rate %s", FormatRate(l.Net.Rate), FormatRate(c.Net.Rate))
		}
		sum += l.Net.Rate
	}
	if sum > c.Net.Rate {
		v.add("net.rate", "%s is less than the sum of the lanes' rates, %s", FormatRate(c.Net.Rate), FormatRate(sum))
	}
}

func (v *validator) rule(c *Config, i int, fr *fileRule) (Rule, bool) {
	key := fmt.Sprintf("rule[%d]", i+1)
	n0 := len(v.errs)
	r := Rule{Line: v.pos.line(key)}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	r.Lane, r.Exe, r.Comm, r.User, r.Cgroup, r.Unit = str(fr.Lane), str(fr.Exe), str(fr.Comm), str(fr.User), str(fr.Cgroup), str(fr.Unit)
	switch {
	case fr.Lane == nil:
		v.add(key, "rule has no lane")
	default:
		if _, ok := c.Lanes[r.Lane]; !ok {
			v.add(key+".lane", "unknown lane %q (lanes: %s)", r.Lane, strings.Join(c.Order, ", "))
		}
	}
	if fr.Exe == nil && fr.Comm == nil && fr.User == nil && fr.Cgroup == nil && fr.Unit == nil {
		v.add(key, "rule has no match field (exe, comm, user, cgroup or unit)")
	}
	for _, f := range []struct {
		name string
		p    *string
	}{{"exe", fr.Exe}, {"comm", fr.Comm}, {"user", fr.User}, {"cgroup", fr.Cgroup}, {"unit", fr.Unit}} {
		if f.p != nil && *f.p == "" {
			v.add(key+"."+f.name, "empty")
		}
	}
	if r.Exe != "" {
		if err := validGlob(r.Exe); err != nil {
			v.add(key+".exe", "bad glob %q: %v", r.Exe, err)
		}
	}
	if r.Cgroup != "" && !strings.HasPrefix(r.Cgroup, "/") {
		v.add(key+".cgroup", "%q does not start with /", r.Cgroup)
	}
	if len(r.Comm) > 15 {
		v.add(key+".comm", "%q is longer than 15 bytes, the kernel's limit on command names", r.Comm)
	}
	return r, len(v.errs) == n0
}

// decodeError turns go-toml's syntax and type errors into a *FieldError.
func decodeError(source string, err error, pos keyPositions) error {
	var de *toml.DecodeError
	if !errors.As(err, &de) {
		return fmt.Errorf("%s: %w", source, err)
	}
	line, col := de.Position()
	key := pos.keyAt(line, col, de.Key())
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	msg = typeMismatchRE.ReplaceAllStringFunc(msg, func(m string) string {
		s := typeMismatchRE.FindStringSubmatch(m)
		return fmt.Sprintf("got %s, want %s", s[1], tomlTypeOf(s[2]))
	})
	return &FieldError{Source: source, Line: line, Key: key, Msg: msg}
}

var typeMismatchRE = regexp.MustCompile(`cannot decode TOML (\S+) into (?:struct field \S+ of type )?(\S+)`)

// tomlTypeOf names the TOML type that decodes into Go type t.
func tomlTypeOf(t string) string {
	t = strings.TrimPrefix(t, "*")
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "integer"
	case strings.HasPrefix(t, "float"):
		return "number"
	case t == "bool":
		return "boolean"
	case t == "string":
		return "string"
	case strings.HasPrefix(t, "[]"):
		return "array"
	default:
		return "table"
	}
}

// displayKey renders a go-toml key; array-table indices are not known
// there, so rules show as plain "rule.lane".
func displayKey(k toml.Key) string {
	return strings.Join(k, ".")
}

func lineOf(err error) int {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Line
	}
	return 0
}

// CheckCapPeriod says whether a cap with its own period (cpu.cap_period)
// holds on ncpu CPUs: the kernel takes no quota under a millisecond, so a
// shorter one would be raised silently and the cap loosened.
func CheckCapPeriod(c CPU, ncpu int) error {
	if c.CapPeriod == 0 || c.CapPercent <= 0 {
		return nil
	}
	q := c.CapPercent / 100 * float64(ncpu) * float64(c.CapPeriod)
	if q >= float64(time.Millisecond) {
		return nil
	}
	least := time.Duration(math.Ceil(float64(time.Millisecond)/(c.CapPercent/100*float64(ncpu))/float64(time.Millisecond))) * time.Millisecond
	return fmt.Errorf("a cap of %g%% of %d CPUs is %v in every %v, under the kernel's least quota of 1ms: use a period of at least %v",
		c.CapPercent, ncpu, time.Duration(q).Round(time.Microsecond), c.CapPeriod, least)
}

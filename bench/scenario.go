package bench

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/lanes-qos/lanes/internal/rate"
	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/workload"
)

// Roles of workloads.
const (
	Foreground  = "foreground"
	Background  = "background"
	Interactive = "interactive"
)

// Scenario is a parsed scenario file.
type Scenario struct {
	Name        string
	Description string
	Path        string // file it came from
	Paths       int    // topology paths (1: src — rtr — dst)
	// Duration is the length of each measured phase; Idle that of the
	// idle-link latency phase; Lead how long background runs before the
	// others start in a mixed phase; Settle the pause between phases.
	Duration, Idle, Lead, Settle time.Duration
	Repeats                      int
	// ReferenceInteractive adds a reference phase to each repeat: the
	// foreground beside the interactive workloads on the plain link
	// (PhaseFgInteractive), the reference of ArmSummary.FgKeptInt. On a
	// slow link the interactive workload's own packets are a share of
	// the capacity no arm can give the foreground (irtt every 10 ms: 74
	// kbit/s, 5.6 % of a 1.3 Mbit/s uplink).
	ReferenceInteractive bool
	Up, Down             LinkSpec
	Variants             []Variant
	Workloads            []Work
	Arms                 []Arm
	Vars                 map[string]string
	// Matrix, if set, sweeps the foreground's intensity and the arms' PI.
	Matrix *Matrix
	// Paper lists the seed's published figures the results are read
	// against; the markdown prints them beside the tables.
	Paper []string
	// Axes are the congestion controls and offload settings every variant
	// is swept over (Variants holds the result).
	Axes Axes
	base []Variant // the file's variants before the axes
}

// Sweep replaces the scenario's axes with the non-empty ones of a (lanes
// bench --cc, --offloads) and expands the variants again.
func (s *Scenario) Sweep(a Axes) error {
	if len(a.CC) > 0 {
		s.Axes.CC = a.CC
	}
	if len(a.Offloads) > 0 {
		s.Axes.Offloads = a.Offloads
	}
	vs, err := s.Axes.Expand(s.base)
	if err != nil {
		return err
	}
	s.Variants = vs
	return nil
}

// Matrix is seed 003's evaluation matrix: every intensity of the
// foreground against every arm, arms marked pi_sweep once per PI.
type Matrix struct {
	// Intensities in percent (0, 100]: the share of each period in which
	// the foreground workloads (kinds pulse and rr) generate requests.
	Intensities []float64
	// PIs are the preemption intervals, each put in $PI of the arms that
	// sweep it: "off", "0", a duration, "inf", "auto" or "adaptive", as
	// lanesd's [net.idletime] pi takes them.
	PIs []string
	// ReferenceArm, if set, is the arm whose setup, services and wrappers
	// the reference phases (idle, foreground alone, background alone) run
	// under instead of the plain link: where lanes' own shaper is the
	// bottleneck, "alone" must be measured under it. ReferencePI is its
	// $PI when it sweeps the PI.
	ReferenceArm, ReferencePI string
}

// LinkSpec is one direction of the emulated link as written in a file.
type LinkSpec struct {
	Rate         string  `toml:"rate"`
	Delay        string  `toml:"delay"`
	QueuePackets int     `toml:"queue_packets"`
	QueueBytes   int     `toml:"queue_bytes"`
	Loss         float64 `toml:"loss"`
	Trace        string  `toml:"trace"`
	// Steps, instead of Rate or Trace, changes the rate at times: each
	// is ["10s", "5mbit"], from that time (counted from the emulator's
	// start) until the next step; the whole repeats every StepsPeriod.
	Steps       [][2]string `toml:"steps"`
	StepsPeriod string      `toml:"steps_period"`
	Burst       *BurstSpec  `toml:"burst"`
	Down        [][2]string `toml:"down"`        // fixed outages [start, end)
	DownPeriod  string      `toml:"down_period"` // repeat the outages
	OnOff       *OnOffSpec  `toml:"onoff"`
	Seed        uint64      `toml:"seed"`
}

// BurstSpec is Gilbert–Elliott loss.
type BurstSpec struct {
	P        float64 `toml:"p"`
	R        float64 `toml:"r"`
	LossGood float64 `toml:"loss_good"`
	LossBad  float64 `toml:"loss_bad"`
}

// OnOffSpec is an exponential up/down schedule.
type OnOffSpec struct {
	MeanUp   string `toml:"mean_up"`
	MeanDown string `toml:"mean_down"`
}

// Variant runs the whole scenario again with some link settings changed
// (e.g. another delay), or with another congestion control or offloads.
type Variant struct {
	Name     string   `toml:"name"`
	Up, Down LinkSpec // fields set here override the scenario's link
	// CC, if set, replaces the congestion control of every TCP workload
	// (iperf3, pulse, rr): a name such as "cubic" or "bbr", or "default"
	// for the host's default (net.ipv4.tcp_congestion_control).
	CC string `toml:"cc"`
	// Offloads is "on" (the kernel's defaults: TSO, GSO and GRO on the
	// veths of the topology) or "off" (all three off); "" is "on".
	Offloads string `toml:"offloads"`
}

// Axes sweep every variant over congestion controls and offload
// settings: each variant runs once per combination, named
// variant/cc/offloads-X (the parts of a one-value axis left out).
type Axes struct {
	CC       []string `toml:"cc"`
	Offloads []string `toml:"offloads"`
}

// ccRE matches a congestion control name as the kernel spells them.
var ccRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,15}$`)

// validate checks a variant's congestion control and offloads.
func (v Variant) validate() error {
	if v.CC != "" && !ccRE.MatchString(v.CC) {
		return fmt.Errorf("variant %s: cc %q: want a congestion control name (cubic, bbr) or default", v.Name, v.CC)
	}
	switch v.Offloads {
	case "", "on", "off":
	default:
		return fmt.Errorf("variant %s: offloads %q: want on or off", v.Name, v.Offloads)
	}
	return nil
}

// Expand returns the variants swept over a's axes (the scenario's own
// variants, or the base link when it has none).
func (a Axes) Expand(vs []Variant) ([]Variant, error) {
	if len(a.CC) == 0 && len(a.Offloads) == 0 {
		return vs, nil
	}
	implicit := len(vs) == 0
	if implicit {
		vs = []Variant{{Name: "base"}}
	}
	ccs, offs := a.CC, a.Offloads
	if len(ccs) == 0 {
		ccs = []string{""}
	}
	if len(offs) == 0 {
		offs = []string{""}
	}
	var out []Variant
	seen := map[string]bool{}
	for _, v := range vs {
		for _, cc := range ccs {
			for _, off := range offs {
				x := v
				var parts []string
				if !implicit {
					parts = append(parts, v.Name)
				}
				if cc != "" {
					x.CC = cc
					parts = append(parts, cc)
				}
				if off != "" {
					x.Offloads = off
					parts = append(parts, "offloads-"+off)
				}
				x.Name = strings.Join(parts, "/")
				if err := x.validate(); err != nil {
					return nil, err
				}
				if seen[x.Name] {
					return nil, fmt.Errorf("axes: variant %s twice (a value given twice?)", x.Name)
				}
				seen[x.Name] = true
				out = append(out, x)
			}
		}
	}
	return out, nil
}

// Variant returns the named variant (the base link's for "base").
func (s *Scenario) Variant(name string) Variant {
	for _, v := range s.Variants {
		if v.Name == name {
			return v
		}
	}
	return Variant{Name: name}
}

// WorkloadFor returns w as it runs in variant: with the variant's
// congestion control on a TCP workload ("default": none given, the
// host's).
func (s *Scenario) WorkloadFor(variant string, w workload.Spec) workload.Spec {
	cc := s.Variant(variant).CC
	if cc == "" {
		return w
	}
	tcp := w.Kind == workload.Pulse || w.Kind == workload.ReqResp || w.Kind == workload.IPerf3 && w.Protocol != "udp"
	if !tcp {
		return w
	}
	if cc == "default" {
		cc = ""
	}
	w.CC = cc
	return w
}

// Work is a workload with its role.
type Work struct {
	Role string
	Spec workload.Spec
	// KeepCC keeps the workload's own congestion control (none given: the
	// system's, as a program that does not choose) in every variant.
	KeepCC bool
}

// Command is a command run in one of the topology's namespaces ("src",
// "dst", "rtr" or "rtrN") through sh -c, after variable expansion.
type Command struct {
	NS  string `toml:"ns"`
	Cmd string `toml:"cmd"`
}

// Arm is one way of running the scenario's mixed phase.
type Arm struct {
	Name        string
	Description string
	Setup       []Command
	Teardown    []Command
	// Services are started after Setup and killed before Teardown (e.g.
	// lanesd with a config).
	Services []Command
	// Wrap maps a workload name to the command its client is run under
	// (e.g. ["$LANES", "run", "-l", "background", "--"]).
	Wrap map[string][]string
	// SweepPI runs the arm once per PI of the matrix, with $PI set.
	SweepPI bool
	// Collect are commands run when the workloads are done, before the
	// services stop (e.g. `lanes status --json`); their output is kept
	// with the phase, and lanes' idletime counters are read from it.
	Collect []Command
	// CC maps a TCP workload's name to the congestion control it uses in
	// this arm's mixed phases, over the variant's and keep_cc (e.g. a
	// background that is cubic in a baseline arm, where a network
	// namespace can default only to what the host allows).
	CC map[string]string
}

// sameRun reports whether a and b run the same: the same commands, wraps
// and congestion controls (names, descriptions and teardowns aside).
func (a Arm) sameRun(b Arm) bool {
	return slices.Equal(a.Setup, b.Setup) && slices.Equal(a.Services, b.Services) && a.SweepPI == b.SweepPI &&
		maps.EqualFunc(a.Wrap, b.Wrap, slices.Equal) && maps.Equal(a.CC, b.CC)
}

// arm returns the arm named name, or nil.
func (s *Scenario) arm(name string) *Arm {
	for i := range s.Arms {
		if s.Arms[i].Name == name {
			return &s.Arms[i]
		}
	}
	return nil
}

type fileScenario struct {
	Name        string            `toml:"name"`
	Description string            `toml:"description"`
	Topology    string            `toml:"topology"`
	Paths       int               `toml:"paths"`
	Duration    string            `toml:"duration"`
	Idle        string            `toml:"idle"`
	Lead        string            `toml:"background_lead"`
	Settle      string            `toml:"settle"`
	Repeats     int               `toml:"repeats"`
	RefInt      bool              `toml:"reference_interactive"`
	Paper       []string          `toml:"paper"`
	Vars        map[string]string `toml:"vars"`
	Matrix      *struct {
		Intensity    []float64 `toml:"intensity"`
		PI           []string  `toml:"pi"`
		ReferenceArm string    `toml:"reference_arm"`
		ReferencePI  string    `toml:"reference_pi"`
	} `toml:"matrix"`
	Link struct {
		Up   LinkSpec `toml:"up"`
		Down LinkSpec `toml:"down"`
	} `toml:"link"`
	Variant  []Variant      `toml:"variant"`
	Axes     *Axes          `toml:"axes"`
	Workload []fileWorkload `toml:"workload"`
	Arm      []fileArm      `toml:"arm"`
}

type fileWorkload struct {
	Name        string   `toml:"name"`
	Role        string   `toml:"role"`
	Kind        string   `toml:"kind"`
	Direction   string   `toml:"direction"`
	Path        int      `toml:"path"`
	Port        int      `toml:"port"`
	CC          string   `toml:"cc"`
	Protocol    string   `toml:"protocol"`
	Rate        string   `toml:"rate"`
	Streams     int      `toml:"streams"`
	TOS         int      `toml:"tos"`
	Interval    string   `toml:"interval"`
	PacketBytes int      `toml:"packet_bytes"`
	FPS         int      `toml:"fps"`
	FrameBytes  int      `toml:"frame_bytes"`
	ReqBytes    int      `toml:"request_bytes"`
	RespBytes   int      `toml:"response_bytes"`
	Think       string   `toml:"think"`
	ThinkExp    bool     `toml:"think_exponential"`
	Intensity   float64  `toml:"intensity"` // percent
	Period      string   `toml:"period"`
	SndBuf      int      `toml:"sndbuf"`
	Args        []string `toml:"args"`
	KeepCC      bool     `toml:"keep_cc"`
}

type fileArm struct {
	Name        string              `toml:"name"`
	Description string              `toml:"description"`
	Setup       []Command           `toml:"setup"`
	Teardown    []Command           `toml:"teardown"`
	Services    []Command           `toml:"services"`
	Wrap        map[string][]string `toml:"wrap"`
	SweepPI     bool                `toml:"pi_sweep"`
	Collect     []Command           `toml:"collect"`
	CC          map[string]string   `toml:"cc"`
}

// Load reads and validates a scenario file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load scenario: %w", err)
	}
	s, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func dur(field, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %q: want a duration such as 15s", field, s)
	}
	return d, nil
}

// Parse parses a scenario; path names it in errors and anchors relative
// trace paths.
func Parse(path string, data []byte) (*Scenario, error) {
	var f fileScenario
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		var se *toml.StrictMissingError
		if errors.As(err, &se) && len(se.Errors) > 0 {
			var msgs []string
			for _, e := range se.Errors {
				row, _ := e.Position()
				msgs = append(msgs, fmt.Sprintf("%s:%d: unknown key %s", path, row, strings.Join(e.Key(), ".")))
			}
			return nil, fmt.Errorf("scenario %s", strings.Join(msgs, "; "))
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("scenario %s:%d:%d: %s", path, row, col, de.Error())
		}
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	s, err := f.scenario(path)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return s, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

func (f *fileScenario) scenario(path string) (*Scenario, error) {
	s := &Scenario{Name: f.Name, Description: f.Description, Path: path, Paths: 1,
		Repeats: f.Repeats, ReferenceInteractive: f.RefInt, Up: f.Link.Up, Down: f.Link.Down, Variants: f.Variant, Vars: f.Vars}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	switch f.Topology {
	case "", "line":
	case "two-path":
		s.Paths = 2
	default:
		return nil, fmt.Errorf("topology %q: want line or two-path", f.Topology)
	}
	if f.Paths > 0 {
		s.Paths = f.Paths
	}
	var err error
	if s.Duration, err = dur("duration", f.Duration, 15*time.Second); err != nil {
		return nil, err
	}
	if s.Idle, err = dur("idle", f.Idle, 3*time.Second); err != nil {
		return nil, err
	}
	if s.Lead, err = dur("background_lead", f.Lead, 2*time.Second); err != nil {
		return nil, err
	}
	if s.Settle, err = dur("settle", f.Settle, time.Second); err != nil {
		return nil, err
	}
	if s.Repeats <= 0 {
		s.Repeats = 1
	}
	names := map[string]bool{}
	for i, w := range f.Workload {
		spec := workload.Spec{Name: w.Name, Kind: w.Kind, Direction: w.Direction, Path: w.Path, Port: w.Port,
			CC: w.CC, Protocol: w.Protocol, Streams: w.Streams, TOS: w.TOS, PacketBytes: w.PacketBytes, FPS: w.FPS,
			FrameBytes: w.FrameBytes, ReqBytes: w.ReqBytes, RespBytes: w.RespBytes, ThinkExp: w.ThinkExp, Args: w.Args,
			Intensity: w.Intensity / 100, SndBuf: w.SndBuf}
		if !nameRE.MatchString(w.Name) || names[w.Name] {
			return nil, fmt.Errorf("workload %d: name %q: want a unique name of letters, digits, - and _", i+1, w.Name)
		}
		names[w.Name] = true
		switch w.Role {
		case Foreground, Background, Interactive:
		default:
			return nil, fmt.Errorf("workload %s: role %q: want foreground, background or interactive", w.Name, w.Role)
		}
		if w.Rate != "" {
			if spec.Rate, err = rate.Parse(w.Rate); err != nil {
				return nil, fmt.Errorf("workload %s: %w", w.Name, err)
			}
		}
		if spec.Interval, err = dur("workload "+w.Name+" interval", w.Interval, 0); err != nil {
			return nil, err
		}
		if spec.Think, err = dur("workload "+w.Name+" think", w.Think, 0); err != nil {
			return nil, err
		}
		if spec.Period, err = dur("workload "+w.Name+" period", w.Period, 0); err != nil {
			return nil, err
		}
		if spec.Path >= s.Paths {
			return nil, fmt.Errorf("workload %s: path %d: the topology has %d", w.Name, spec.Path, s.Paths)
		}
		if err := spec.Validate(); err != nil {
			return nil, err
		}
		s.Workloads = append(s.Workloads, Work{Role: w.Role, Spec: spec, KeepCC: w.KeepCC})
	}
	if len(s.Workloads) == 0 {
		return nil, errors.New("no [[workload]]")
	}
	arms := map[string]bool{}
	for i, a := range f.Arm {
		if !nameRE.MatchString(a.Name) || arms[a.Name] {
			return nil, fmt.Errorf("arm %d: name %q: want a unique name of letters, digits, - and _", i+1, a.Name)
		}
		arms[a.Name] = true
		for w := range a.Wrap {
			if !names[w] {
				return nil, fmt.Errorf("arm %s: wrap names unknown workload %q", a.Name, w)
			}
			if len(a.Wrap[w]) == 0 {
				return nil, fmt.Errorf("arm %s: wrap for %s is empty", a.Name, w)
			}
		}
		for w, cc := range a.CC {
			if !names[w] {
				return nil, fmt.Errorf("arm %s: cc names unknown workload %q", a.Name, w)
			}
			if !ccRE.MatchString(cc) {
				return nil, fmt.Errorf("arm %s: cc %q for %s: want a congestion control name (cubic, bbr)", a.Name, cc, w)
			}
		}
		for _, c := range append(append(append(append([]Command(nil), a.Setup...), a.Teardown...), a.Services...), a.Collect...) {
			if !validNS(c.NS, s.Paths) {
				return nil, fmt.Errorf("arm %s: namespace %q: want src, dst, rtr or rtr0..rtr%d", a.Name, c.NS, s.Paths-1)
			}
		}
		arm := Arm{Name: a.Name, Description: a.Description, Setup: a.Setup,
			Teardown: a.Teardown, Services: a.Services, Wrap: a.Wrap, SweepPI: a.SweepPI, Collect: a.Collect, CC: a.CC}
		for _, b := range s.Arms {
			if b.sameRun(arm) {
				return nil, fmt.Errorf("arm %s runs exactly what arm %s runs (setup, services, wrap and cc): it would measure nothing new", a.Name, b.Name)
			}
		}
		s.Arms = append(s.Arms, arm)
	}
	if len(s.Arms) == 0 {
		return nil, errors.New("no [[arm]]")
	}
	s.Paper = f.Paper
	if err := s.matrix(f); err != nil {
		return nil, err
	}
	if s.ReferenceInteractive {
		roles := map[string]bool{}
		for _, w := range s.Workloads {
			roles[w.Role] = true
		}
		switch {
		case s.Matrix != nil:
			return nil, errors.New("reference_interactive: not with a [matrix] (its foreground alone is measured per intensity)")
		case !roles[Foreground] || !roles[Interactive]:
			return nil, errors.New("reference_interactive: the scenario needs a foreground and an interactive workload")
		}
	}
	for _, v := range s.Variants {
		if err := v.validate(); err != nil {
			return nil, err
		}
	}
	s.base = s.Variants
	if f.Axes != nil {
		s.Axes = *f.Axes
		if s.Variants, err = f.Axes.Expand(s.base); err != nil {
			return nil, err
		}
	}
	for _, v := range append([]Variant{{Name: "base", Up: s.Up, Down: s.Down}}, s.Variants...) {
		for _, dir := range []string{"up", "down"} {
			if _, err := s.LinkConfig(v.Name, dir); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// piRE matches the PI values lanesd's [net.idletime] pi takes.
var piRE = regexp.MustCompile(`^(off|0|inf|auto|adaptive|[0-9.]+(ns|us|µs|ms|s))$`)

func (s *Scenario) matrix(f *fileScenario) error {
	m := f.Matrix
	if m == nil {
		for _, a := range s.Arms {
			if a.SweepPI {
				return fmt.Errorf("arm %s: pi_sweep needs [matrix] pi", a.Name)
			}
		}
		return nil
	}
	s.Matrix = &Matrix{Intensities: m.Intensity, PIs: m.PI, ReferenceArm: m.ReferenceArm, ReferencePI: m.ReferencePI}
	seen := map[float64]bool{}
	for _, x := range m.Intensity {
		if x <= 0 || x > 100 || seen[x] {
			return fmt.Errorf("matrix: intensity %v: want distinct percentages in (0, 100]", x)
		}
		seen[x] = true
	}
	if len(m.Intensity) == 0 {
		s.Matrix.Intensities = []float64{100}
	}
	sort.Float64s(s.Matrix.Intensities)
	swept := false
	for _, a := range s.Arms {
		swept = swept || a.SweepPI
	}
	if swept && len(m.PI) == 0 {
		return errors.New("matrix: arms sweep the PI but [matrix] pi is empty")
	}
	for _, pi := range append(append([]string(nil), m.PI...), m.ReferencePI) {
		if pi != "" && !piRE.MatchString(pi) {
			return fmt.Errorf("matrix: pi %q: want off, 0, a duration (20ms), inf, auto or adaptive", pi)
		}
	}
	if m.ReferenceArm != "" {
		a, ok := s.Arm(m.ReferenceArm)
		switch {
		case !ok:
			return fmt.Errorf("matrix: reference_arm %q: no such arm", m.ReferenceArm)
		case a.SweepPI && m.ReferencePI == "":
			return fmt.Errorf("matrix: reference_arm %s sweeps the PI: set reference_pi", a.Name)
		}
	}
	for _, w := range s.Workloads {
		if w.Role == Foreground && w.Spec.Intensity > 0 {
			return fmt.Errorf("workload %s: the matrix sets the foreground's intensity; leave it out", w.Spec.Name)
		}
	}
	return nil
}

// restrict replaces the matrix's intensities and PIs with those given
// (none: keep the file's).
func (s *Scenario) restrict(intensities []float64, pis []string) error {
	if len(intensities) == 0 && len(pis) == 0 {
		return nil
	}
	if s.Matrix == nil {
		return errors.New("--intensity and --pi need a scenario with a [matrix]")
	}
	for _, x := range intensities {
		if x <= 0 || x > 100 {
			return fmt.Errorf("intensity %v: want a percentage in (0, 100]", x)
		}
	}
	for _, pi := range pis {
		if !piRE.MatchString(pi) {
			return fmt.Errorf("pi %q: want off, 0, a duration (20ms), inf, auto or adaptive", pi)
		}
	}
	m := *s.Matrix
	if len(intensities) > 0 {
		m.Intensities = append([]float64(nil), intensities...)
		sort.Float64s(m.Intensities)
	}
	if len(pis) > 0 {
		m.PIs = pis
	}
	s.Matrix = &m
	return nil
}

// Intensities are the matrix's intensities in percent, or a single 0
// (the workloads' own) without a matrix.
func (s *Scenario) Intensities() []float64 {
	if s.Matrix == nil {
		return []float64{0}
	}
	return s.Matrix.Intensities
}

// ArmRun is an arm at one PI ("" for arms that do not sweep it).
type ArmRun struct {
	Arm Arm
	PI  string
}

// Label names an arm run in tables: the arm, and its PI.
func (a ArmRun) Label() string { return label(a.Arm.Name, a.PI) }

func label(arm, pi string) string {
	if pi == "" {
		return arm
	}
	return arm + " PI " + pi
}

// ArmRuns expands arms into their runs: one per PI for arms that sweep it.
func (s *Scenario) ArmRuns(arms []Arm) []ArmRun {
	var out []ArmRun
	for _, a := range arms {
		if !a.SweepPI || s.Matrix == nil {
			out = append(out, ArmRun{Arm: a})
			continue
		}
		for _, pi := range s.Matrix.PIs {
			out = append(out, ArmRun{Arm: a, PI: pi})
		}
	}
	return out
}

func validNS(ns string, paths int) bool {
	switch ns {
	case "src", "dst", "rtr":
		return true
	}
	for i := 0; i < paths; i++ {
		if ns == fmt.Sprintf("rtr%d", i) {
			return true
		}
	}
	return false
}

// VariantNames lists the variants to run: "base" alone, or the file's
// variants.
func (s *Scenario) VariantNames() []string {
	if len(s.Variants) == 0 {
		return []string{"base"}
	}
	var n []string
	for _, v := range s.Variants {
		n = append(n, v.Name)
	}
	return n
}

// merge overlays the fields set in o onto l.
func merge(l, o LinkSpec) LinkSpec {
	if o.Rate != "" {
		l.Rate, l.Trace, l.Steps, l.StepsPeriod = o.Rate, "", nil, ""
	}
	if o.Trace != "" {
		l.Trace, l.Rate, l.Steps, l.StepsPeriod = o.Trace, "", nil, ""
	}
	if o.Steps != nil {
		l.Steps, l.Rate, l.Trace = o.Steps, "", ""
	}
	if o.StepsPeriod != "" {
		l.StepsPeriod = o.StepsPeriod
	}
	if o.Delay != "" {
		l.Delay = o.Delay
	}
	if o.QueuePackets != 0 {
		l.QueuePackets = o.QueuePackets
	}
	if o.QueueBytes != 0 {
		l.QueueBytes = o.QueueBytes
	}
	if o.Loss != 0 {
		l.Loss = o.Loss
	}
	if o.Burst != nil {
		l.Burst = o.Burst
	}
	if o.Down != nil {
		l.Down = o.Down
	}
	if o.DownPeriod != "" {
		l.DownPeriod = o.DownPeriod
	}
	if o.OnOff != nil {
		l.OnOff = o.OnOff
	}
	if o.Seed != 0 {
		l.Seed = o.Seed
	}
	return l
}

// LinkSpecFor returns the link spec of a variant and direction.
func (s *Scenario) LinkSpecFor(variant, dir string) LinkSpec {
	l := s.Up
	if dir == "down" {
		l = s.Down
	}
	for _, v := range s.Variants {
		if v.Name == variant {
			o := v.Up
			if dir == "down" {
				o = v.Down
			}
			l = merge(l, o)
		}
	}
	return l
}

// TraceDirs are searched for a trace file by its base name when it is not
// where the scenario names it: the directories of $LANES_TRACES
// (colon-separated), then /usr/share/lanes/traces.
func TraceDirs() []string {
	var dirs []string
	for _, d := range strings.Split(os.Getenv("LANES_TRACES"), ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return append(dirs, "/usr/share/lanes/traces")
}

// LinkConfig builds the emulator configuration of a variant and
// direction.
func (s *Scenario) LinkConfig(variant, dir string) (linkem.Config, error) {
	l := s.LinkSpecFor(variant, dir)
	var c linkem.Config
	var err error
	where := fmt.Sprintf("link.%s (variant %s)", dir, variant)
	if l.Rate != "" {
		if c.Rate, err = rate.Parse(l.Rate); err != nil {
			return c, fmt.Errorf("%s: %w", where, err)
		}
	}
	if l.Trace != "" {
		if c.Trace, err = s.loadTrace(l.Trace); err != nil {
			return c, fmt.Errorf("%s: %w", where, err)
		}
	}
	if len(l.Steps) > 0 {
		if c.Trace, err = l.stepTrace(where); err != nil {
			return c, err
		}
	}
	if c.Delay, err = dur(where+" delay", l.Delay, 0); err != nil {
		return c, err
	}
	c.QueuePackets, c.QueueBytes, c.Loss, c.Seed = l.QueuePackets, l.QueueBytes, l.Loss, l.Seed
	if b := l.Burst; b != nil {
		c.Burst = &linkem.GilbertElliott{P: b.P, R: b.R, LossGood: b.LossGood, LossBad: b.LossBad}
	}
	if len(l.Down) > 0 {
		fs := &linkem.FixedSchedule{}
		if fs.Period, err = dur(where+" down_period", l.DownPeriod, 0); err != nil {
			return c, err
		}
		for _, iv := range l.Down {
			a, err1 := dur(where+" down", iv[0], 0)
			b, err2 := dur(where+" down", iv[1], 0)
			if err := errors.Join(err1, err2); err != nil {
				return c, err
			}
			if b <= a {
				return c, fmt.Errorf("%s: outage [%s, %s) is empty", where, iv[0], iv[1])
			}
			fs.Down = append(fs.Down, linkem.Interval{Start: a, End: b})
		}
		sort.Slice(fs.Down, func(i, j int) bool { return fs.Down[i].Start < fs.Down[j].Start })
		c.Schedule = fs
	}
	if o := l.OnOff; o != nil {
		if c.Schedule != nil {
			return c, fmt.Errorf("%s: down and onoff both set", where)
		}
		up, err1 := dur(where+" onoff.mean_up", o.MeanUp, 0)
		down, err2 := dur(where+" onoff.mean_down", o.MeanDown, 0)
		if err := errors.Join(err1, err2); err != nil {
			return c, err
		}
		if up <= 0 || down <= 0 {
			return c, fmt.Errorf("%s: onoff needs mean_up and mean_down > 0", where)
		}
		c.Schedule = linkem.NewExpSchedule(up, down, max(1, l.Seed))
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%s: %w", where, err)
	}
	return c, nil
}

// steps parses the link's rate steps and their period.
func (l LinkSpec) steps(where string) ([]linkem.Step, time.Duration, error) {
	if l.Rate != "" || l.Trace != "" {
		return nil, 0, fmt.Errorf("%s: steps replace rate and trace: set one of the three", where)
	}
	period, err := dur(where+" steps_period", l.StepsPeriod, 0)
	if err != nil {
		return nil, 0, err
	}
	if period <= 0 {
		return nil, 0, fmt.Errorf("%s: steps need steps_period (the time after which they repeat)", where)
	}
	var steps []linkem.Step
	for _, st := range l.Steps {
		at, err := dur(where+" steps", st[0], 0)
		if err != nil {
			return nil, 0, err
		}
		r, err := rate.Parse(st[1])
		if err != nil {
			return nil, 0, fmt.Errorf("%s: steps: %q: %w", where, st[1], err)
		}
		steps = append(steps, linkem.Step{At: at, Rate: r})
	}
	return steps, period, nil
}

func (l LinkSpec) stepTrace(where string) (*linkem.Trace, error) {
	steps, period, err := l.steps(where)
	if err != nil {
		return nil, err
	}
	t, err := linkem.StepTrace(where+" steps", steps, period)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return t, nil
}

// Returns lists the times, from the emulator's start and in [from, to),
// at which a variant's link in direction dir gets its capacity back: each
// step up of its steps and the end of each fixed outage. Recovery is
// measured from these (ArmSummary.RecoveryS); recorded traces and random
// on/off schedules have none.
func (s *Scenario) Returns(variant, dir string, from, to time.Duration) []time.Duration {
	l := s.LinkSpecFor(variant, dir)
	var out []time.Duration
	add := func(at, period time.Duration) {
		if period <= 0 {
			if at >= from && at < to {
				out = append(out, at)
			}
			return
		}
		for t := at + time.Duration(max(0, int64((from-at)/period)))*period; t < to; t += period {
			if t >= from {
				out = append(out, t)
			}
		}
	}
	if len(l.Steps) > 0 {
		if steps, period, err := l.steps(""); err == nil {
			for i, st := range steps {
				prev := steps[len(steps)-1] // the period wraps around
				if i > 0 {
					prev = steps[i-1]
				}
				if st.Rate > prev.Rate && (i > 0 || len(steps) > 1) {
					add(st.At, period)
				}
			}
		}
	}
	// The outages' ends, from the spec (LinkConfig would load the trace).
	if period, err := dur("", l.DownPeriod, 0); err == nil {
		for _, iv := range l.Down {
			if end, err := dur("", iv[1], 0); err == nil {
				add(end, period)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (s *Scenario) loadTrace(name string) (*linkem.Trace, error) {
	cands := []string{name}
	if !filepath.IsAbs(name) {
		cands = []string{filepath.Join(filepath.Dir(s.Path), name)}
	}
	for _, d := range TraceDirs() {
		cands = append(cands, filepath.Join(d, filepath.Base(name)))
	}
	var errs []error
	for _, c := range cands {
		t, err := linkem.LoadTrace(c)
		if err == nil {
			return t, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("trace %s not found in %s: %w", name, strings.Join(cands, ", "), errs[0])
}

// Arm returns the arm named name.
func (s *Scenario) Arm(name string) (Arm, bool) {
	for _, a := range s.Arms {
		if a.Name == name {
			return a, true
		}
	}
	return Arm{}, false
}

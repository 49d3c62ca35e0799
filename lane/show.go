package lane

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/lanes-qos/lanes/autorate"
	"github.com/lanes-qos/lanes/boost"
	"github.com/lanes-qos/lanes/idletime"
)

// File writes the config as a complete config file: every setting in
// force, the built-in defaults and what a file merged over them, in the
// file's own keys, so that Parse reads back the same config (`lanes config
// show`). The [[controller]] tables are the exception: they are named in
// a comment, not written out.
func (c *Config) File() ([]byte, error) {
	f := fileConfig{Default: ptr(c.Default), Lanes: map[string]*fileLane{}}
	f.Daemon = &fileDaemon{Socket: ptr(c.Daemon.Socket), StateDir: ptr(c.Daemon.StateDir), SocketGID: ptr(c.Daemon.SocketGID), Metrics: ptr(c.Daemon.Metrics)}
	f.Net = c.Net.file()
	f.Disk = &fileDiskGlobal{Idletime: &fileDiskIdle{filePI: piFile(c.DiskIdle.PI), Devices: nonNilStrings(c.DiskIdle.Devices)}}
	// With nothing shaped, a lane's shaping keys are written only where
	// they differ from what the lane starts from (so that what the file
	// warned about, and only that, warns again).
	shaped := c.Net.Rate != 0 || c.Net.Auto != nil
	def := Default()
	for _, name := range c.Order {
		base, ok := def.Lanes[name]
		if !ok {
			base = def.Lanes[Normal]
		}
		f.Lanes[name] = c.Lanes[name].file(base, shaped)
	}
	for _, r := range c.Rules {
		f.Rule = append(f.Rule, fileRule{Lane: ptr(r.Lane), Exe: opt(r.Exe), Comm: opt(r.Comm), User: opt(r.User), Cgroup: opt(r.Cgroup), Unit: opt(r.Unit)})
	}
	f.Events = &fileEvents{History: ptr(int64(c.Events.History)), Retention: ptr(c.Events.Retention.String()), HistoryTopics: nonNilStrings(c.Events.HistoryTopics)}
	f.Monitor = &fileMonitor{Period: ptr(c.Monitor.Period.String()), Report: ptr(c.Monitor.Report.String())}
	for _, t := range c.Monitor.Thresholds {
		ft := fileThreshold{Name: ptr(t.Name), Lane: ptr(t.Lane), Metric: ptr(t.Metric), Hysteresis: ptr(t.Hysteresis)}
		if t.Above {
			ft.Above = ptr(t.Value)
		} else {
			ft.Below = ptr(t.Value)
		}
		f.Monitor.Threshold = append(f.Monitor.Threshold, ft)
	}
	f.Bridge = &fileBridge{URL: opt(c.Bridge.URL), Host: opt(c.Bridge.Host), Export: nonNilStrings(c.Bridge.Export), Import: nonNilStrings(c.Bridge.Import),
		Out: opt(c.Bridge.Out), In: opt(c.Bridge.In), Buffer: ptr(c.Bridge.Buffer), Credentials: opt(c.Bridge.Credentials)}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The configuration in force: %s merged over the built-in defaults.\n", c.Source)
	if n := len(c.Controllers); n > 0 {
		var names []string
		for _, s := range c.Controllers {
			names = append(names, s.Name)
		}
		fmt.Fprintf(&b, "# Not written out below: %d [[controller]] table(s) (%s), as in %s.\n", n, strings.Join(names, ", "), c.Source)
	}
	b.WriteString("\n")
	// The lanes go last, one by one in the config's order (an encoded map
	// would sort them, and the order of user lanes is the file's).
	lanes := f.Lanes
	f.Lanes = nil
	if err := encode(&b, f); err != nil {
		return nil, err
	}
	for _, name := range c.Order {
		b.WriteString("\n")
		if err := encode(&b, struct {
			Lanes map[string]*fileLane `toml:"lanes"`
		}{map[string]*fileLane{name: lanes[name]}}); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// encode writes v as TOML without a bare [lanes] header (each lane's
// [lanes.NAME] defines it, and a second [lanes] would be a duplicate).
func encode(b *bytes.Buffer, v any) error {
	var t bytes.Buffer
	enc := toml.NewEncoder(&t)
	enc.SetIndentTables(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("config show: %w", err)
	}
	for _, line := range strings.SplitAfter(t.String(), "\n") {
		if strings.TrimSpace(line) != "[lanes]" {
			b.WriteString(line)
		}
	}
	return nil
}

func (n NetGlobal) file() *fileNetGlobal {
	fn := &fileNetGlobal{Interfaces: nonNilStrings(n.Interfaces), Ingress: ptr(n.Ingress), RxWindow: ptr(n.RxWindow),
		Classifier: ptr(n.Classifier), ReplaceRoot: ptr(n.ReplaceRoot),
		Idletime: &fileNetIdle{filePI: piFile(n.Idle.PI), Mark: ptr(n.Idle.Mark), Follow: ptr(n.Idle.Follow), PIRTT: ptr(n.Idle.RTT)},
		Ledbat:   &fileLedbat{Target: ptr(n.LedbatTarget.String())}}
	switch {
	case n.Auto != nil:
		a := n.Auto
		fn.Rate = ptr("auto")
		fn.Auto = &fileNetAuto{Upload: ptr(FormatRate(a.Law.Min[autorate.Egress]) + ".." + FormatRate(a.Law.Max[autorate.Egress])),
			Reflector: ptr(a.Reflector.String()), Interval: ptr(a.Interval.String()), Threshold: ptr(a.Law.Threshold.String()),
			Probe: ptr(a.Probe), Delivery: ptr(a.Delivery), Law: ptr(AutoLawCeiling)}
		if a.Law.Follow {
			fn.Auto.Law, fn.Auto.Target = ptr(AutoLawFollow), ptr(a.Law.Target.String())
		}
		if a.Law.Max[autorate.Ingress] != 0 {
			fn.Auto.Download = ptr(FormatRate(a.Law.Min[autorate.Ingress]) + ".." + FormatRate(a.Law.Max[autorate.Ingress]))
		}
	case n.Rate != 0:
		fn.Rate = ptr(FormatRate(n.Rate))
	}
	return fn
}

func (l *Lane) file(base *Lane, shaped bool) *fileLane {
	fl := &fileLane{Unprivileged: ptr(l.Unprivileged),
		CPU:  &fileCPU{Weight: ptr(l.CPU.Weight), Idle: ptr(l.CPU.Idle)},
		Disk: &fileDisk{Class: ptr(string(l.Disk.Class)), Level: ptr(l.Disk.Level)},
		Net:  &fileLaneNet{CC: ptr(l.Net.CC)}}
	if l.CPU.CapPercent > 0 { // 0: no cap, which the file says by leaving cap out
		fl.CPU.Cap = ptr(l.CPU.CapPercent)
		if l.CPU.CapPeriod > 0 {
			fl.CPU.CapPeriod = ptr(l.CPU.CapPeriod.String())
		}
	}
	if l.CPU.SendRate > 0 {
		fl.CPU.SendRate = ptr(FormatRate(l.CPU.SendRate))
	}
	if l.CPU.ReservePercent > 0 {
		fl.CPU.Reserve = ptr(FormatReserve(l.CPU.ReservePercent, l.CPU.ReservePeriod))
	}
	if l.Disk.Weight > 0 { // 0: the kernel's default weight
		fl.Disk.Weight = ptr(l.Disk.Weight)
	}
	if l.Disk.Class == IONone {
		fl.Disk.Class = ptr("none")
	}
	if b := l.Boost; b.Kind != "" {
		fl.Boost = &fileBoost{Policy: ptr(string(b.Kind)), Initial: ptr(b.Initial), Clamp: ptr(b.Clamp), OnLeave: ptr(string(b.OnLeave))}
		if b.Slice != 0 {
			fl.Boost.Slice = ptr(b.Slice.String())
		}
		if b.From != "" {
			fl.Boost.From = ptr(string(b.From))
		}
		if b.Kind != boost.Static {
			fl.Boost.Final, fl.Boost.Step = ptr(b.Final), ptr(string(b.Step))
			switch b.Step {
			case boost.Events:
				fl.Boost.Every = int64(b.Every)
			case boost.Time:
				fl.Boost.Every = time.Duration(b.Every).String()
			case boost.Bytes:
				fl.Boost.Every = int64(b.Every)
			}
		}
	}
	n, b := l.Net, base.Net
	if shaped || n.Priority != b.Priority {
		fl.Net.Priority = ptr(n.Priority)
	}
	if shaped || n.Borrow != b.Borrow {
		fl.Net.Borrow = ptr(n.Borrow)
	}
	if shaped || n.Idletime != b.Idletime {
		fl.Net.Idletime = ptr(n.Idletime)
	}
	if !n.Idletime && (shaped || n.Quiet != b.Quiet) { // an idletime lane never preempts: the file leaves preempts out
		fl.Net.Preempts = ptr(!n.Quiet)
	}
	if n.Rate != 0 {
		fl.Net.Rate = ptr(FormatRate(n.Rate))
	}
	if n.Ceil != 0 {
		fl.Net.Ceil = ptr(FormatRate(n.Ceil))
	}
	if n.Target != 0 {
		fl.Net.Target = ptr(n.Target.String())
	}
	for _, p := range n.Ports {
		fl.Net.Ports = append(fl.Net.Ports, p.String())
	}
	return fl
}

// piFile writes a preemption-interval policy as its keys.
func piFile(p idletime.Policy) filePI {
	var f filePI
	switch p.Mode {
	case idletime.Fixed:
		if p.PI == 0 {
			f.PI = ptr("off")
		} else {
			f.PI = ptr(idletime.FormatPI(p.PI))
		}
	case idletime.Auto:
		f.PI, f.PIK = ptr("auto"), ptr(p.K)
	case idletime.Adaptive:
		f.PI = ptr("adaptive")
	}
	if p.Min != 0 {
		f.PIMin = ptr(p.Min.String())
	}
	if p.Max != 0 {
		f.PIMax = ptr(p.Max.String())
	}
	return f
}

func ptr[T any](v T) *T { return &v }

// opt is nil for "" (a key left out).
func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return append([]string(nil), s...)
}

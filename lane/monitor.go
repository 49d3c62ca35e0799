package lane

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

type fileMonitor struct {
	Period    *string         `toml:"period"`
	Report    *string         `toml:"report"`
	Threshold []fileThreshold `toml:"threshold,omitempty"`
}

type fileThreshold struct {
	Name       *string  `toml:"name"`
	Lane       *string  `toml:"lane"`
	Metric     *string  `toml:"metric"`
	Above      *float64 `toml:"above"`
	Below      *float64 `toml:"below"`
	Hysteresis *float64 `toml:"hysteresis"`
}

var thresholdNameRE = laneNameRE

// monitor merges and checks [monitor] over the base's. A file's report
// interval is checked against its period; a period set without a report
// makes the report the period. A file's thresholds replace the base's.
func (v *validator) monitor(c *Config, fm *fileMonitor) {
	m := &c.Monitor
	if fm == nil {
		return
	}
	dur := func(key string, s *string) (time.Duration, bool) {
		d, err := time.ParseDuration(*s)
		switch {
		case err != nil:
			v.add(key, "invalid duration %q: want e.g. \"1s\" or \"100ms\"", *s)
			return 0, false
		case d < MinMonitorPeriod || d > MaxMonitorPeriod:
			v.add(key, "%s is outside %s..%s", d, MinMonitorPeriod, MaxMonitorPeriod)
			return 0, false
		}
		return d, true
	}
	okPeriod := true
	if fm.Period != nil {
		var d time.Duration
		if d, okPeriod = dur("monitor.period", fm.Period); okPeriod {
			m.Period = d
			if fm.Report == nil {
				m.Report = d
			}
		}
	}
	if fm.Report != nil {
		if d, ok := dur("monitor.report", fm.Report); ok {
			m.Report = d
		}
	}
	if okPeriod && m.Report < m.Period {
		v.add("monitor.report", "%s is shorter than monitor.period %s: a sample cannot be reported more often than it is taken", m.Report, m.Period)
	}
	if v.pos.tables["monitor.threshold"] {
		v.add("monitor.threshold", "write thresholds as [[monitor.threshold]], an array of tables")
	}
	if fm.Threshold == nil {
		return
	}
	m.Thresholds = nil
	names := map[string]int{}
	for i := range fm.Threshold {
		if t, ok := v.threshold(c, i, &fm.Threshold[i]); ok {
			if first, dup := names[t.Name]; dup {
				v.add(fmt.Sprintf("monitor.threshold[%d].name", i+1), "%q is also the name of monitor.threshold[%d]", t.Name, first)
				continue
			}
			names[t.Name] = i + 1
			m.Thresholds = append(m.Thresholds, t)
		}
	}
}

func (v *validator) threshold(c *Config, i int, ft *fileThreshold) (Threshold, bool) {
	key := fmt.Sprintf("monitor.threshold[%d]", i+1)
	n0 := len(v.errs)
	t := Threshold{Line: v.pos.line(key)}
	switch {
	case ft.Name == nil:
		v.add(key, "threshold has no name")
	case !thresholdNameRE.MatchString(*ft.Name):
		v.add(key+".name", "invalid name %q: want a lowercase letter, then up to 30 lowercase letters, digits or '-'", *ft.Name)
	default:
		t.Name = *ft.Name
	}
	switch {
	case ft.Lane == nil:
		v.add(key, "threshold has no lane")
	default:
		t.Lane = *ft.Lane
		if _, ok := c.Lanes[t.Lane]; !ok {
			v.add(key+".lane", "unknown lane %q (lanes: %s)", t.Lane, strings.Join(c.Order, ", "))
		}
	}
	switch {
	case ft.Metric == nil:
		v.add(key, "threshold has no metric (one of %s)", strings.Join(MonitorMetrics, ", "))
	case !slices.Contains(MonitorMetrics, *ft.Metric):
		v.add(key+".metric", "unknown metric %q (want one of %s)", *ft.Metric, strings.Join(MonitorMetrics, ", "))
	default:
		t.Metric = *ft.Metric
	}
	finite := func(k string, p *float64) bool {
		if math.IsNaN(*p) || math.IsInf(*p, 0) {
			v.add(key+"."+k, "%g is not a finite number", *p)
			return false
		}
		return true
	}
	switch {
	case ft.Above != nil && ft.Below != nil:
		v.add(key+".below", "give either above or below, not both")
	case ft.Above != nil:
		if finite("above", ft.Above) {
			t.Above, t.Value = true, *ft.Above
		}
	case ft.Below != nil:
		if finite("below", ft.Below) {
			t.Value = *ft.Below
		}
	default:
		v.add(key, "threshold has neither above nor below")
	}
	if ft.Hysteresis != nil && finite("hysteresis", ft.Hysteresis) {
		t.Hysteresis = *ft.Hysteresis
		if t.Hysteresis < 0 {
			v.add(key+".hysteresis", "%g is negative", t.Hysteresis)
		}
	}
	return t, len(v.errs) == n0
}

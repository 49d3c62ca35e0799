package bench

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/workload"
)

// Phases of a repeat.
const (
	PhaseIdle    = "idle"     // interactive workloads alone: idle-link latency
	PhaseFgAlone = "fg-alone" // foreground alone on the plain link
	PhaseBgAlone = "bg-alone" // background alone on the plain link
	// PhaseFgInteractive: the foreground beside the interactive
	// workloads on the plain link (Scenario.ReferenceInteractive).
	PhaseFgInteractive = "fg-interactive"
	PhaseMixed         = "mixed" // everything at once, under an arm
)

// PhaseResult is one measured phase.
type PhaseResult struct {
	Variant   string                     `json:"variant"`
	Repeat    int                        `json:"repeat"`
	Phase     string                     `json:"phase"`
	Arm       string                     `json:"arm,omitempty"`
	PI        string                     `json:"pi,omitempty"`
	Intensity float64                    `json:"intensity,omitempty"` // percent, in a matrix
	Start     time.Time                  `json:"start"`
	Seconds   float64                    `json:"seconds"`
	Workloads map[string]workload.Result `json:"workloads"`
	Errors    []string                   `json:"errors,omitempty"`
	Link      linkem.Report              `json:"link"` // the emulator's own account
	// SeriesStart is the emulator's time at the start of Link's Series
	// (the phase's start, to its 100 ms).
	SeriesStart time.Duration `json:"series_start_ns,omitempty"`
	// LinkOrigin is the emulator's time the link's trace and schedule
	// started from in this phase (its start, to its 100 ms;
	// linkem.Emulator.Restart); 0 in runs from before it: their links
	// started with the testbed.
	LinkOrigin time.Duration `json:"link_origin_ns,omitempty"`
	// Collected holds the outputs of the arm's collect commands.
	Collected []json.RawMessage `json:"collected,omitempty"`
}

// Stat summarises one metric over repeats.
type Stat struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func (s *Stat) add(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	if s.N == 0 || v < s.Min {
		s.Min = v
	}
	if s.N == 0 || v > s.Max {
		s.Max = v
	}
	s.Mean = (s.Mean*float64(s.N) + v) / float64(s.N+1)
	s.N++
}

// ArmSummary holds an arm's ratios over the repeats of one variant (and,
// in a matrix, one intensity and PI).
type ArmSummary struct {
	Variant   string  `json:"variant"`
	Arm       string  `json:"arm"`
	PI        string  `json:"pi,omitempty"`
	Intensity float64 `json:"intensity,omitempty"`
	// FgKept is foreground throughput in the mixed phase over foreground
	// alone on the plain link (in a matrix: at the same intensity, under
	// the reference arm if there is one).
	FgKept Stat `json:"fg_kept"`
	// FgKeptInt is foreground throughput in the mixed phase over the
	// foreground beside the interactive workloads on the plain link
	// (Scenario.ReferenceInteractive): what the background (and the arm)
	// took from it, without the interactive workloads' own share of the
	// link, which they take in the mixed phase too. (A loss-based
	// foreground in a deep FIFO makes either reference move by a few
	// percent with where its last losses fall: bytes behind a lost
	// segment count only once its retransmission crossed the queue.)
	FgKeptInt Stat `json:"fg_kept_vs_interactive"`
	// BgShare is background throughput over the capacity foreground left
	// (capacity: the most a workload got alone in the same repeat:
	// background alone or foreground alone, in a matrix at any
	// intensity). What foreground
	// left is capacity − foreground in the mixed phase, or in a matrix
	// capacity − foreground alone at the same intensity (seed 003's
	// "remaining link capacity"). Not computed when foreground left less
	// than 5 % of the capacity.
	BgShare Stat `json:"bg_share_of_leftover"`
	// Foreground request latency (rr) in the mixed phase, and its p99
	// over the p99 of foreground alone.
	FgP50ms      Stat `json:"fg_p50_ms"`
	FgP99ms      Stat `json:"fg_p99_ms"`
	FgP99vsAlone Stat `json:"fg_p99_vs_alone"`
	FgMbps       Stat `json:"fg_mbps"`
	BgMbps       Stat `json:"bg_mbps"`
	// FgStallMs is the longest time without a byte arriving of the
	// foreground TCP transfers in the mixed phase (100 ms resolution).
	FgStallMs Stat `json:"fg_max_stall_ms"`
	// Interactive latency in the mixed phase (ms) and over the idle link's.
	P50ms      Stat     `json:"interactive_p50_ms"`
	P99ms      Stat     `json:"interactive_p99_ms"`
	P50vsIdle  Stat     `json:"interactive_p50_vs_idle"`
	P99vsIdle  Stat     `json:"interactive_p99_vs_idle"`
	Errors     []string `json:"errors,omitempty"`
	LatenessUs Stat     `json:"emulator_lateness_p99_us"`
	// RecoveryS is, on a link whose capacity comes back (a step up or an
	// outage's end, Scenario.Returns), the time until the upload delivers
	// 90 % of the capacity again over half a second: the worst return of
	// the phase.
	RecoveryS Stat `json:"recovery_s"`
	// lanes' idletime counters, from `lanes status --json` collected at
	// the end of the phase (over all gates, counted from lanesd's start):
	// holds of the background, preemptions (foreground arriving while
	// background was served) and the hold reaction p99 (the worst gate).
	IdleHolds       Stat `json:"idle_holds"`
	IdlePreemptions Stat `json:"idle_preemptions"`
	IdleReactionMs  Stat `json:"idle_reaction_p99_ms"`
	// IdlePIms is the PI in force at the end of the phase (the largest
	// over the gates): what "auto" and "adaptive" chose.
	IdlePIms Stat `json:"idle_pi_ms"`
}

// Reference holds the plain-link measurements of a variant (at one
// intensity in a matrix).
type Reference struct {
	Variant   string  `json:"variant"`
	Intensity float64 `json:"intensity,omitempty"`
	FgMbps    Stat    `json:"fg_alone_mbps"`
	// FgIntMbps is the foreground beside the interactive workloads
	// (PhaseFgInteractive), when the scenario measures it.
	FgIntMbps Stat `json:"fg_beside_interactive_mbps"`
	FgP99ms   Stat `json:"fg_alone_p99_ms"`
	BgMbps    Stat `json:"bg_alone_mbps"`
	IdleP50ms Stat `json:"idle_p50_ms"`
	IdleP99ms Stat `json:"idle_p99_ms"`
}

// Results is everything a run produced.
type Results struct {
	Scenario    string        `json:"scenario"`
	Description string        `json:"description"`
	File        string        `json:"file"`
	Started     time.Time     `json:"started"`
	Finished    time.Time     `json:"finished"`
	Repeats     int           `json:"repeats"`
	PhaseLength time.Duration `json:"phase_length_ns"`
	Host        Host          `json:"host"`
	Links       []string      `json:"links"`
	Reference   []Reference   `json:"reference"`
	Summary     []ArmSummary  `json:"summary"`
	Phases      []PhaseResult `json:"phases"`
	// Matrix is the scenario's intensity × PI sweep, if any; Paper the
	// seed's figures to read the results against.
	Matrix *Matrix  `json:"matrix,omitempty"`
	Paper  []string `json:"paper,omitempty"`
}

// Host describes the machine a run used; other load disturbs numbers.
type Host struct {
	Kernel     string `json:"kernel"`
	CPUs       int    `json:"cpus"`
	LoadStart  string `json:"loadavg_start"`
	LoadFinish string `json:"loadavg_finish"`
}

func sumRole(s *Scenario, p *PhaseResult, role string) (float64, bool) {
	var sum float64
	ok := false
	for _, w := range s.Workloads {
		if w.Role != role {
			continue
		}
		r, found := p.Workloads[w.Spec.Name]
		if !found {
			return 0, false
		}
		sum += r.Throughput
		ok = true
	}
	return sum, ok
}

// maxStall is the longest stall of a role's TCP transfers (iperf3).
func maxStall(s *Scenario, p *PhaseResult, role string) (time.Duration, bool) {
	var st time.Duration
	ok := false
	for _, w := range s.Workloads {
		if w.Role != role || w.Spec.Kind != workload.IPerf3 || w.Spec.Protocol == "udp" {
			continue
		}
		if r, found := p.Workloads[w.Spec.Name]; found {
			st, ok = max(st, r.MaxStall), true
		}
	}
	return st, ok
}

// latency returns the first workload of a role that measured latency.
func latency(s *Scenario, p *PhaseResult, role string) (p50, p99 float64, ok bool) {
	for _, w := range s.Workloads {
		if w.Role != role {
			continue
		}
		r, found := p.Workloads[w.Spec.Name]
		if !found || r.LatencyP50 == 0 {
			continue
		}
		return float64(r.LatencyP50) / 1e6, float64(r.LatencyP99) / 1e6, true
	}
	return 0, 0, false
}

// interactive returns the first interactive workload's latency.
func interactive(s *Scenario, p *PhaseResult) (p50, p99 float64, ok bool) {
	return latency(s, p, Interactive)
}

// Summarize computes the references and the arms' ratios from the phases.
func Summarize(s *Scenario, phases []PhaseResult) ([]Reference, []ArmSummary) {
	type key struct {
		variant   string
		repeat    int
		phase     string
		intensity float64
	}
	// The idle link and background alone are measured once per repeat,
	// foreground alone once per intensity.
	ref := map[key]*PhaseResult{}
	for i := range phases {
		p := &phases[i]
		if p.Phase != PhaseMixed {
			ref[key{p.Variant, p.Repeat, p.Phase, p.Intensity}] = p
		}
	}
	var refs []Reference
	var sums []ArmSummary
	for _, v := range s.VariantNames() {
		for _, in := range s.Intensities() {
			rf := Reference{Variant: v, Intensity: in}
			for i := range phases {
				p := &phases[i]
				if p.Variant != v {
					continue
				}
				switch {
				case p.Phase == PhaseFgAlone && p.Intensity == in:
					if x, ok := sumRole(s, p, Foreground); ok {
						rf.FgMbps.add(x / 1e6)
					}
					if _, b, ok := latency(s, p, Foreground); ok {
						rf.FgP99ms.add(b)
					}
				case p.Phase == PhaseFgInteractive && p.Intensity == in:
					if x, ok := sumRole(s, p, Foreground); ok {
						rf.FgIntMbps.add(x / 1e6)
					}
				case p.Phase == PhaseBgAlone:
					if x, ok := sumRole(s, p, Background); ok {
						rf.BgMbps.add(x / 1e6)
					}
				case p.Phase == PhaseIdle:
					if a, b, ok := interactive(s, p); ok {
						rf.IdleP50ms.add(a)
						rf.IdleP99ms.add(b)
					}
				}
			}
			refs = append(refs, rf)
			for _, run := range s.ArmRuns(s.Arms) {
				as := ArmSummary{Variant: v, Arm: run.Arm.Name, PI: run.PI, Intensity: in}
				ran := false
				for i := range phases {
					p := &phases[i]
					if p.Variant != v || p.Phase != PhaseMixed || p.Arm != run.Arm.Name || p.PI != run.PI || p.Intensity != in {
						continue
					}
					ran = true
					// The link's capacity: the most any workload got alone in
					// this repeat (background alone, or the foreground at any
					// intensity).
					capacity := 0.0
					if ba := ref[key{v, p.Repeat, PhaseBgAlone, 0}]; ba != nil {
						capacity, _ = sumRole(s, ba, Background)
					}
					for _, x := range s.Intensities() {
						if fa := ref[key{v, p.Repeat, PhaseFgAlone, x}]; fa != nil {
							f, _ := sumRole(s, fa, Foreground)
							capacity = max(capacity, f)
						}
					}
					as.add(s, p, ref[key{v, p.Repeat, PhaseFgAlone, in}], capacity, ref[key{v, p.Repeat, PhaseIdle, 0}])
					if fi := ref[key{v, p.Repeat, PhaseFgInteractive, in}]; fi != nil {
						beside, _ := sumRole(s, fi, Foreground)
						if fg, ok := sumRole(s, p, Foreground); ok && beside > 0 {
							as.FgKeptInt.add(fg / beside)
						}
					}
				}
				if ran { // arms left out of this run (Options.Arms) get no row
					sums = append(sums, as)
				}
			}
		}
	}
	return refs, sums
}

// add accounts one mixed phase p against the references of its repeat:
// foreground alone fa and the idle link (nil when not measured), and the
// link's capacity.
func (as *ArmSummary) add(s *Scenario, p, fa *PhaseResult, capacity float64, idle *PhaseResult) {
	as.Errors = append(as.Errors, p.Errors...)
	as.LatenessUs.add(float64(max(p.Link.Up.Lateness.P99, p.Link.Down.Lateness.P99)) / 1e3)
	if r, ok := recovery(s, p, "up"); ok {
		as.RecoveryS.add(r.Seconds())
	}
	fg, fgOK := sumRole(s, p, Foreground)
	bg, bgOK := sumRole(s, p, Background)
	if fgOK {
		as.FgMbps.add(fg / 1e6)
		if st, ok := maxStall(s, p, Foreground); ok {
			as.FgStallMs.add(float64(st) / 1e6)
		}
	}
	if bgOK {
		as.BgMbps.add(bg / 1e6)
	}
	var fgAlone float64
	if fa != nil {
		fgAlone, _ = sumRole(s, fa, Foreground)
	}
	if fgOK && fgAlone > 0 {
		as.FgKept.add(fg / fgAlone)
	}
	if bgOK && capacity > 0 {
		left := capacity
		switch {
		case s.Matrix != nil:
			left -= fgAlone
		case fgOK:
			left -= fg
		}
		if left > 0.05*capacity { // else a ratio of two small, noisy numbers
			as.BgShare.add(bg / left)
		}
	}
	if a, b, ok := latency(s, p, Foreground); ok {
		as.FgP50ms.add(a)
		as.FgP99ms.add(b)
		if fa != nil {
			if _, fb, ok := latency(s, fa, Foreground); ok && fb > 0 {
				as.FgP99vsAlone.add(b / fb)
			}
		}
	}
	if g, ok := idleCounters(p.Collected); ok {
		as.IdleHolds.add(g.holds)
		as.IdlePreemptions.add(g.preemptions)
		as.IdleReactionMs.add(g.reactionMs)
		as.IdlePIms.add(g.piMs)
	}
	if a, b, ok := interactive(s, p); ok {
		as.P50ms.add(a)
		as.P99ms.add(b)
		if idle != nil {
			if ia, ib, ok := interactive(s, idle); ok && ia > 0 && ib > 0 {
				as.P50vsIdle.add(a / ia)
				as.P99vsIdle.add(b / ib)
			}
		}
	}
}

// Recovery constants: the window over which the delivered rate must
// reach RecoveryShare of the capacity, and the time before a phase's end
// after which a return is not measured.
const (
	RecoveryShare  = 0.9
	recoveryWindow = 500 * time.Millisecond
	recoveryTail   = 3 * time.Second
)

// recovery returns the longest time, over the phase's capacity returns in
// direction dir, until the link delivered RecoveryShare of its capacity
// over recoveryWindow; a return never recovered counts until the phase's
// end. Returns in the phase's first second or its last recoveryTail are
// left out.
func recovery(s *Scenario, p *PhaseResult, dir string) (time.Duration, bool) {
	st := p.Link.Up
	if dir == "down" {
		st = p.Link.Down
	}
	step := linkem.SeriesStep
	// The schedule's returns and the trace count from the link's
	// origin; the series from the emulator's start.
	o := p.LinkOrigin
	end := p.SeriesStart + time.Duration(len(st.Series))*step
	returns := s.Returns(p.Variant, dir, p.SeriesStart-o+time.Second, end-o-recoveryTail)
	if len(returns) == 0 || len(st.Series) == 0 {
		return 0, false
	}
	for i := range returns {
		returns[i] += o
	}
	c, err := s.LinkConfig(p.Variant, dir)
	if err != nil {
		return 0, false
	}
	capacity := func(from, to time.Duration) float64 { // bytes
		switch {
		case c.Trace != nil:
			return c.Trace.Capacity(from-o, to-o) / 8
		default:
			return float64(c.Rate) / 8 * (to - from).Seconds()
		}
	}
	win := int(recoveryWindow / step)
	worst, ok := time.Duration(0), false
	for _, t := range returns {
		b := int((t - p.SeriesStart + step - 1) / step) // the first whole bucket after t
		took := end - t
		for k := b; k+win <= len(st.Series); k++ {
			var got uint64
			for _, x := range st.Series[k : k+win] {
				got += x
			}
			from := p.SeriesStart + time.Duration(k)*step
			if float64(got) >= RecoveryShare*capacity(from, from+recoveryWindow) {
				took = max(0, from-t)
				break
			}
		}
		worst, ok = max(worst, took), true
	}
	return worst, ok
}

// Rewrite reads a results file, summarizes its phases again against its
// scenario (the file it names, or scenario if not empty) and the matrix
// cells the run chose, and writes the results anew into dir: a report of
// this version from the measurements of an earlier run.
func Rewrite(results, scenario, dir string) ([]string, error) {
	data, err := os.ReadFile(results)
	if err != nil {
		return nil, fmt.Errorf("rewrite results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("rewrite results %s: %w", results, err)
	}
	if scenario == "" {
		scenario = r.File
	}
	s, err := Load(scenario)
	if err != nil {
		return nil, err
	}
	if r.Matrix != nil && s.Matrix != nil {
		// The matrix as run: --intensity and --pi chose its cells. The
		// scenario's own cannot name what the run measured.
		m := *r.Matrix
		m.ReferenceArm, m.ReferencePI = s.Matrix.ReferenceArm, s.Matrix.ReferencePI
		s.Matrix = &m
	}
	r.Matrix, r.Paper = s.Matrix, s.Paper
	r.Reference, r.Summary = Summarize(s, r.Phases)
	return r.Write(dir)
}

// Write writes <dir>/<scenario>.json, .md and .svg.
func (r *Results) Write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write results: %w", err)
	}
	base := filepath.Join(dir, r.Scenario)
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode results: %w", err)
	}
	files := []string{base + ".json", base + ".md", base + ".svg"}
	var md, svg strings.Builder
	r.Markdown(&md, filepath.Base(files[2]))
	r.SVG(&svg)
	for i, data := range [][]byte{append(j, '\n'), []byte(md.String()), []byte(svg.String())} {
		if err := os.WriteFile(files[i], data, 0o644); err != nil {
			return nil, fmt.Errorf("write results: %w", err)
		}
	}
	return files, nil
}

func fmtStat(s Stat, format string) string {
	switch {
	case s.N == 0:
		return "–"
	case s.N == 1 || fmt.Sprintf(format, s.Min) == fmt.Sprintf(format, s.Max):
		return fmt.Sprintf(format, s.Mean)
	default:
		return fmt.Sprintf(format+" ("+format+"–"+format+")", s.Mean, s.Min, s.Max)
	}
}

// Markdown writes the results as a markdown section; svgName, if not
// empty, is linked as the plot.
func (r *Results) Markdown(w io.Writer, svgName string) {
	if r.Matrix != nil {
		r.matrixMarkdown(w, svgName)
		return
	}
	fmt.Fprintf(w, "### %s\n\n", r.Scenario)
	if r.Description != "" {
		fmt.Fprintf(w, "%s\n\n", r.Description)
	}
	fmt.Fprintf(w, "Run %s–%s UTC, %d repeat(s), %v per phase; kernel %s, %d CPUs, load average %s at start, %s at the end.\n\n",
		r.Started.UTC().Format("2006-01-02 15:04"), r.Finished.UTC().Format("15:04"), r.Repeats, r.PhaseLength,
		r.Host.Kernel, r.Host.CPUs, r.Host.LoadStart, r.Host.LoadFinish)
	for _, l := range r.Links {
		fmt.Fprintf(w, "- link %s\n", l)
	}
	fmt.Fprintln(w)
	// The foreground beside the interactive workloads, where measured.
	besideInt := false
	for _, rf := range r.Reference {
		besideInt = besideInt || rf.FgIntMbps.N > 0
	}
	intHead, intRule := "", ""
	if besideInt {
		intHead, intRule = " fg beside interactive Mbit/s |", "---|"
	}
	fmt.Fprintln(w, "| variant | fg alone Mbit/s |"+intHead+" bg alone Mbit/s | idle p50 ms | idle p99 ms |")
	fmt.Fprintln(w, "|---|---|"+intRule+"---|---|---|")
	for _, rf := range r.Reference {
		cell := ""
		if besideInt {
			cell = " " + fmtStat(rf.FgIntMbps, "%.2f") + " |"
		}
		fmt.Fprintf(w, "| %s | %s |%s %s | %s | %s |\n", rf.Variant, fmtStat(rf.FgMbps, "%.2f"), cell, fmtStat(rf.BgMbps, "%.2f"),
			fmtStat(rf.IdleP50ms, "%.1f"), fmtStat(rf.IdleP99ms, "%.1f"))
	}
	fmt.Fprintln(w)
	recov := false
	for _, a := range r.Summary {
		recov = recov || a.RecoveryS.N > 0
	}
	head, rule := "", ""
	if recov {
		head, rule = fmt.Sprintf(" recovery to %.0f %% s |", RecoveryShare*100), "---|"
	}
	keptHead, keptRule := "", ""
	if besideInt {
		keptHead, keptRule = " fg kept (vs fg + interactive) |", "---|"
	}
	fmt.Fprintln(w, "| variant | arm | fg kept (vs fg alone) |"+keptHead+" bg share of leftover | fg Mbit/s | bg Mbit/s | fg longest stall ms | interactive p50 ms (× idle) | interactive p99 ms (× idle) |"+head+" emulator lateness p99 µs |")
	fmt.Fprintln(w, "|---|---|---|"+keptRule+"---|---|---|---|---|---|"+rule+"---|")
	for _, a := range r.Summary {
		cell, kept := "", ""
		if recov {
			cell = " " + fmtStat(a.RecoveryS, "%.1f") + " |"
		}
		if besideInt {
			kept = " " + fmtStat(a.FgKeptInt, "%.2f") + " |"
		}
		fmt.Fprintf(w, "| %s | %s | %s |%s %s | %s | %s | %s | %s (×%s) | %s (×%s) |%s %s |\n", a.Variant, a.Arm,
			fmtStat(a.FgKept, "%.2f"), kept, fmtStat(a.BgShare, "%.2f"), fmtStat(a.FgMbps, "%.2f"), fmtStat(a.BgMbps, "%.2f"), fmtStat(a.FgStallMs, "%.0f"),
			fmtStat(a.P50ms, "%.1f"), fmtStat(a.P50vsIdle, "%.1f"), fmtStat(a.P99ms, "%.1f"), fmtStat(a.P99vsIdle, "%.1f"),
			cell, fmtStat(a.LatenessUs, "%.0f"))
	}
	for _, a := range r.Summary {
		for _, e := range uniq(a.Errors) {
			fmt.Fprintf(w, "\n- **%s/%s failed**: %s", a.Variant, a.Arm, e)
		}
	}
	fmt.Fprintln(w)
	if svgName != "" {
		fmt.Fprintf(w, "\n![%s](%s)\n", r.Scenario, svgName)
	}
}

func uniq(s []string) []string {
	sort.Strings(s)
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// SVG draws the arms' foreground-kept and background-share ratios as bars
// (mean, with a min–max whisker), one group per variant and arm, with the
// interactive p99 written above each group.
func (r *Results) SVG(w io.Writer) {
	if r.Matrix != nil {
		r.heatmaps(w)
		return
	}
	const (
		left, top, plotH = 60.0, 40.0, 240.0
		groupW, barW     = 130.0, 40.0
		yMax             = 1.2
	)
	width := left + groupW*float64(max(1, len(r.Summary))) + 20
	height := top + plotH + 80
	y := func(v float64) float64 { return top + plotH*(1-math.Min(v, yMax)/yMax) }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(w, `<text x="%.0f" y="18" font-size="14">%s: ratios per arm (mean, whisker min–max)</text>`+"\n", left, html.EscapeString(r.Scenario))
	for _, g := range []float64{0, 0.25, 0.5, 0.75, 1, 1.2} {
		fmt.Fprintf(w, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, width-20, y(g), y(g), map[bool]string{true: "#888", false: "#ddd"}[g == 1])
		fmt.Fprintf(w, `<text x="%.0f" y="%.1f" text-anchor="end">%.2f</text>`+"\n", left-6, y(g)+4, g)
	}
	colors := []string{"#3366cc", "#dc9633"}
	for i, a := range r.Summary {
		x0 := left + groupW*float64(i) + 20
		for j, s := range []Stat{a.FgKept, a.BgShare} {
			if s.N == 0 {
				continue
			}
			x := x0 + float64(j)*(barW+5)
			fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.1f" fill="%s"/>`+"\n", x, y(s.Mean), barW, y(0)-y(s.Mean), colors[j])
			fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black"/>`+"\n", x+barW/2, x+barW/2, y(s.Min), y(s.Max))
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%.2f</text>`+"\n", x+barW/2, y(math.Max(s.Mean, s.Max))-4, s.Mean)
		}
		label := a.Arm
		if len(r.Reference) > 1 {
			label = a.Variant + "/" + a.Arm
		}
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x0+barW, y(0)+16, html.EscapeString(label))
		if a.P99ms.N > 0 {
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">p99 %.0f ms</text>`+"\n", x0+barW, top-4, a.P99ms.Mean)
		}
	}
	ly := y(0) + 40
	fmt.Fprintf(w, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f">foreground kept (vs alone)</text>`+"\n", left, ly, colors[0], left+16, ly+10)
	fmt.Fprintf(w, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f">background share of leftover capacity</text>`+"\n", left+200, ly, colors[1], left+216, ly+10)
	fmt.Fprintln(w, "</svg>")
}

type idleSums struct{ holds, preemptions, reactionMs, piMs float64 }

// idleCounters reads lanes' idletime gates from collected `lanes status
// --json` outputs: {"idletime": [{"holds": …, "preemptions": …,
// "reaction": {"p99_ns": …}}, …]}.
func idleCounters(collected []json.RawMessage) (idleSums, bool) {
	var sum idleSums
	found := false
	for _, c := range collected {
		var st struct {
			Idletime []struct {
				PI          float64 `json:"pi_ns"`
				Holds       float64 `json:"holds"`
				Preemptions float64 `json:"preemptions"`
				Reaction    struct {
					P99 float64 `json:"p99_ns"`
				} `json:"reaction"`
			} `json:"idletime"`
		}
		if json.Unmarshal(c, &st) != nil || len(st.Idletime) == 0 {
			continue
		}
		found = true
		for _, g := range st.Idletime {
			sum.holds += g.Holds
			sum.preemptions += g.Preemptions
			sum.reactionMs = math.Max(sum.reactionMs, g.Reaction.P99/1e6)
			sum.piMs = math.Max(sum.piMs, g.PI/1e6)
		}
	}
	return sum, found
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/netns"
	"github.com/lanes-qos/lanes/testbed/workload"
)

// Sweep removes the namespaces (and processes in them) left by benchmark
// runs that crashed.
func Sweep(logf func(string, ...any)) error { return netns.Sweep(logf) }

type runner struct {
	s        *Scenario
	opts     Options
	arms     []Arm
	logf     func(string, ...any)
	progress io.Writer
	done     int
	total    int
	started  time.Time
}

// Run runs a scenario: for each repeat and variant, the reference phases
// on the plain link (idle latency, foreground alone, background alone),
// then every arm's mixed phase, in an order that rotates from repeat to
// repeat. Each arm gets a fresh topology. Results are written to
// opts.OutDir even when an arm fails; the error then names the failures.
func Run(ctx context.Context, opts Options) error {
	s, err := Load(opts.Scenario)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("bench %s: needs root (network namespaces, tc)", s.Name)
	}
	if opts.Repeats > 0 {
		s.Repeats = opts.Repeats
	}
	if opts.Duration > 0 {
		s.Duration = opts.Duration
		s.Idle = min(s.Idle, opts.Duration)
	}
	if err := s.restrict(opts.Intensities, opts.PIs); err != nil {
		return fmt.Errorf("bench %s: %w", s.Name, err)
	}
	if err := s.Sweep(Axes{CC: opts.CC, Offloads: opts.Offloads}); err != nil {
		return fmt.Errorf("bench %s: %w", s.Name, err)
	}
	r := &runner{s: s, opts: opts, logf: opts.Logf, progress: opts.Progress}
	if r.logf == nil {
		r.logf = func(string, ...any) {}
	}
	if r.progress == nil {
		r.progress = io.Discard
	}
	unlock, err := netns.LockHost(ctx, func() {
		fmt.Fprintf(r.progress, "bench %s: waiting for another testbed user (%s)\n", s.Name, netns.LockPath)
	})
	if err != nil {
		return fmt.Errorf("bench %s: %w", s.Name, err)
	}
	defer unlock()
	r.started = time.Now()
	if len(opts.Arms) == 0 {
		r.arms = s.Arms
	} else {
		for _, name := range opts.Arms {
			a, ok := s.Arm(name)
			if !ok {
				return fmt.Errorf("bench %s: no arm %q", s.Name, name)
			}
			r.arms = append(r.arms, a)
		}
	}
	// A collection stops every goroutine, the emulator's threads included
	// when they come back from a system call; collect less often.
	defer debug.SetGCPercent(debug.SetGCPercent(400))

	res := &Results{Scenario: s.Name, Description: s.Description, File: s.Path, Started: time.Now(),
		Repeats: s.Repeats, PhaseLength: s.Duration, Host: host(), Matrix: s.Matrix, Paper: s.Paper}
	res.Host.LoadStart = loadavg()
	for _, v := range s.VariantNames() {
		for _, dir := range []string{"up", "down"} {
			l := s.LinkSpecFor(v, dir)
			res.Links = append(res.Links, fmt.Sprintf("%s %s: %s", v, dir, describeLink(l)))
		}
	}
	runs := s.ArmRuns(r.arms)
	ints := s.Intensities()
	perRepeat := len(runs) * len(ints)
	if s.has(Interactive) {
		perRepeat++
	}
	if s.has(Background) {
		perRepeat++
	}
	if s.has(Foreground) {
		perRepeat += len(ints)
	}
	if s.ReferenceInteractive {
		perRepeat++
	}
	r.total = perRepeat * s.Repeats * len(s.VariantNames())
	matrix := ""
	if s.Matrix != nil {
		matrix = fmt.Sprintf(" × %d intensit(ies) %v %%", len(ints), ints)
	}
	fmt.Fprintf(r.progress, "bench %s: %d repeat(s) × %d variant(s)%s, %d arm run(s) %s, %v per phase, %d phases\n",
		s.Name, s.Repeats, len(s.VariantNames()), matrix, len(runs), runNames(runs), s.Duration, r.total)

	var failures []string
	for rep := 1; rep <= s.Repeats && ctx.Err() == nil; rep++ {
		for _, v := range s.VariantNames() {
			// The idle link and background alone do not depend on the
			// foreground's intensity; foreground alone does, and runs just
			// before the arms at its intensity.
			ps, err := r.reference(ctx, v, rep, 0, PhaseIdle, PhaseBgAlone)
			res.Phases = append(res.Phases, ps...)
			if err != nil {
				failures = append(failures, err.Error())
			}
			for _, in := range ints {
				names := []string{PhaseFgAlone}
				if r.s.ReferenceInteractive {
					names = append(names, PhaseFgInteractive)
				}
				ps, err := r.reference(ctx, v, rep, in, names...)
				res.Phases = append(res.Phases, ps...)
				if err != nil {
					failures = append(failures, err.Error())
				}
				k := (rep - 1) % len(runs)
				order := append(append([]ArmRun(nil), runs[k:]...), runs[:k]...)
				for _, a := range order {
					if ctx.Err() != nil {
						break
					}
					p := r.mixed(ctx, v, rep, in, a)
					res.Phases = append(res.Phases, p)
					for _, e := range p.Errors {
						failures = append(failures, fmt.Sprintf("%s/%s repeat %d: %s", cellName(v, in), a.Label(), rep, e))
					}
				}
			}
		}
	}
	res.Finished = time.Now()
	res.Host.LoadFinish = loadavg()
	res.Reference, res.Summary = Summarize(s, res.Phases)
	out := opts.OutDir
	if out == "" {
		out = "."
	}
	files, werr := res.Write(out)
	if werr == nil {
		fmt.Fprintf(r.progress, "bench %s: wrote %s\n", s.Name, strings.Join(files, ", "))
		var md strings.Builder
		res.Markdown(&md, "")
		fmt.Fprint(r.progress, md.String())
	}
	var errs []error
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	if werr != nil {
		errs = append(errs, werr)
	}
	if len(failures) > 0 {
		errs = append(errs, fmt.Errorf("%d failure(s): %s", len(failures), strings.Join(uniq(failures), "; ")))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench %s: %w", s.Name, err)
	}
	return nil
}

func runNames(runs []ArmRun) string {
	var n []string
	for _, a := range runs {
		n = append(n, a.Label())
	}
	return "(" + strings.Join(n, ", ") + ")"
}

// cellName names a variant at an intensity in messages.
func cellName(variant string, intensity float64) string {
	if intensity == 0 {
		return variant
	}
	return fmt.Sprintf("%s@%g%%", variant, intensity)
}

func (s *Scenario) has(role string) bool {
	for _, w := range s.Workloads {
		if w.Role == role {
			return true
		}
	}
	return false
}

func (s *Scenario) role(roles ...string) []int {
	var idx []int
	for i, w := range s.Workloads {
		for _, r := range roles {
			if w.Role == r {
				idx = append(idx, i)
			}
		}
	}
	return idx
}

// bed is a topology with its emulators.
type bed struct {
	topo *netns.Topology
	ems  []*linkem.Emulator
	logf func(string, ...any)
}

func (r *runner) build(variant string) (*bed, error) {
	up, err := r.s.LinkConfig(variant, "up")
	if err != nil {
		return nil, err
	}
	down, err := r.s.LinkConfig(variant, "down")
	if err != nil {
		return nil, err
	}
	topo, err := netns.New(r.s.Paths, r.logf)
	if err != nil {
		return nil, err
	}
	b := &bed{topo: topo, logf: r.logf}
	if r.s.Variant(variant).Offloads == "off" {
		if err := offloadsOff(topo); err != nil {
			b.close()
			return nil, err
		}
	}
	for _, p := range topo.Paths {
		// Each path gets its own schedule state: rebuild per path.
		if p != topo.Paths[0] {
			if up, err = r.s.LinkConfig(variant, "up"); err == nil {
				down, err = r.s.LinkConfig(variant, "down")
			}
			if err != nil {
				b.close()
				return nil, err
			}
		}
		em, err := linkem.Start(p.TunUp, p.TunDown, linkem.Options{Up: up, Down: down, Realtime: true, Logf: r.logf})
		if err != nil {
			b.close()
			return nil, err
		}
		b.ems = append(b.ems, em)
	}
	return b, nil
}

// offloadsOff turns TSO, GSO and GRO off on every veth of the topology
// (a variant's offloads = "off"; the default leaves the kernel's).
func offloadsOff(t *netns.Topology) error {
	for _, p := range t.Paths {
		for _, d := range [][2]string{{t.Src, p.SrcDev}, {t.Dst, p.DstDev}, {p.Router, p.RtrSrcDev}, {p.Router, p.RtrDstDev}} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := netns.Command(ctx, d[0], "ethtool", "-K", d[1], "tso", "off", "gso", "off", "gro", "off").CombinedOutput()
			cancel()
			if err != nil {
				return fmt.Errorf("offloads off on %s in %s: %v: %s", d[1], d[0], err, strings.TrimSpace(string(out)))
			}
		}
	}
	return nil
}

func (b *bed) close() {
	for _, em := range b.ems {
		em.Stop()
	}
	if err := b.topo.Close(); err != nil {
		// Close removed what it could; Sweep gets the rest later.
		b.logf("%v (lanes bench --sweep removes leftovers)", err)
	}
}

func (r *runner) step(variant string, rep int, what string) {
	r.done++
	el := time.Since(r.started)
	eta := "?"
	if r.done > 1 {
		eta = (el / time.Duration(r.done-1) * time.Duration(r.total-r.done+1)).Round(time.Second).String()
	}
	fmt.Fprintf(r.progress, "[%s %d/%d, %s elapsed, ~%s left] repeat %d %s: %s\n", r.s.Name, r.done, r.total,
		el.Round(time.Second), eta, rep, variant, what)
}

// reference runs reference phases of one repeat (names among
// PhaseIdle, PhaseFgAlone, PhaseFgInteractive, PhaseBgAlone), each in a
// fresh testbed so that every phase sees the link (a trace, a schedule)
// from its start, as the mixed phases do: on the plain link, or under
// the matrix's reference arm.
func (r *runner) reference(ctx context.Context, variant string, rep int, intensity float64, names ...string) ([]PhaseResult, error) {
	var out []PhaseResult
	var ref *ArmRun
	if m := r.s.Matrix; m != nil && m.ReferenceArm != "" {
		a, _ := r.s.Arm(m.ReferenceArm)
		ref = &ArmRun{Arm: a, PI: ""}
		if a.SweepPI {
			ref.PI = m.ReferencePI
		}
	}
	for _, name := range names {
		roles, d := map[string][]string{PhaseIdle: {Interactive}, PhaseFgAlone: {Foreground},
			PhaseFgInteractive: {Foreground, Interactive}, PhaseBgAlone: {Background}}[name], r.s.Duration
		if name == PhaseIdle {
			d = r.s.Idle
		}
		idx := r.s.role(roles...)
		if len(idx) == 0 || ctx.Err() != nil {
			continue
		}
		what := fmt.Sprintf("%s (%v)", name, d)
		if ref != nil {
			what += " under " + ref.Label()
		}
		r.step(cellName(variant, intensity), rep, what)
		b, err := r.build(variant)
		if err != nil {
			return out, fmt.Errorf("%s repeat %d: build testbed: %w", variant, rep, err)
		}
		p := PhaseResult{Variant: variant, Repeat: rep, Phase: name, Intensity: intensity, Start: time.Now()}
		if ref != nil {
			p.Arm, p.PI = ref.Arm.Name, ref.PI
		}
		var collected []json.RawMessage
		errs := r.armed(ctx, b, variant, intensity, ref, &collected, func(wraps map[string][]string) {
			p = r.phase(ctx, b, p, idx, wraps, d, r.s.Lead)
		})
		p.Collected = collected
		p.Errors = append(p.Errors, errs...)
		b.close()
		fmt.Fprintf(r.progress, "    %s\n", r.brief(&p))
		out = append(out, p)
		time.Sleep(r.s.Settle)
	}
	return out, nil
}

// armed sets arm run a up on the testbed (setup commands, services,
// wrappers with variables expanded), calls fn with the wrappers and tears
// the arm down; a nil a runs fn on the plain testbed. It returns the
// errors of setting up.
//
// The outputs of the arm's collect commands are appended to collected.
func (r *runner) armed(ctx context.Context, b *bed, variant string, intensity float64, a *ArmRun,
	collected *[]json.RawMessage, fn func(wraps map[string][]string)) []string {
	if a == nil {
		fn(nil)
		return nil
	}
	vars := r.vars(b.topo, variant, intensity, a.PI)
	wraps := map[string][]string{}
	for name, argv := range a.Arm.Wrap {
		var exp []string
		for _, x := range argv {
			e, err := expand(x, vars)
			if err != nil {
				return []string{fmt.Sprintf("wrap %s: %v", name, err)}
			}
			exp = append(exp, e)
		}
		if exp[0] == "" {
			return []string{fmt.Sprintf("wrap %s: %q is empty: the lanes arm needs the lanes binary (Options.LanesBin)", name, argv[0])}
		}
		if _, err := exec.LookPath(exp[0]); err != nil {
			return []string{fmt.Sprintf("wrap %s: %v", name, err)}
		}
		wraps[name] = exp
	}
	teardown := func() {
		for _, c := range a.Arm.Teardown {
			if err := r.command(ctx, b.topo, c, vars); err != nil {
				r.logf("arm %s teardown: %v", a.Label(), err)
			}
		}
	}
	for _, c := range a.Arm.Setup {
		if err := r.command(ctx, b.topo, c, vars); err != nil {
			teardown()
			return []string{fmt.Sprintf("setup: %v", err)}
		}
	}
	stop, err := r.services(ctx, b.topo, a.Arm.Services, vars)
	if err != nil {
		teardown()
		return []string{fmt.Sprintf("services: %v", err)}
	}
	fn(wraps)
	var errs []string
	for _, c := range a.Arm.Collect {
		out, err := r.output(ctx, b.topo, c, vars)
		if err != nil {
			errs = append(errs, fmt.Sprintf("collect: %v", err))
			continue
		}
		*collected = append(*collected, out)
	}
	stop()
	teardown()
	return errs
}

// output runs a command like command does and returns its standard
// output: as it is if it is JSON, else as a JSON string.
func (r *runner) output(ctx context.Context, t *netns.Topology, c Command, vars map[string]string) (json.RawMessage, error) {
	cmd, err := expand(c.Cmd, vars)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stderr strings.Builder
	x := netns.Command(ctx, nsName(t, c.NS), "sh", "-c", cmd)
	x.Stderr = &stderr
	out, err := x.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %v: %s", c.NS, cmd, err, strings.TrimSpace(stderr.String()))
	}
	if json.Valid(out) {
		return json.RawMessage(bytes.TrimSpace(out)), nil
	}
	return json.Marshal(string(out))
}

// mixed runs one arm run's mixed phase in a fresh topology.
func (r *runner) mixed(ctx context.Context, variant string, rep int, intensity float64, a ArmRun) PhaseResult {
	r.step(cellName(variant, intensity), rep, fmt.Sprintf("arm %s, mixed (%v + %v background lead)", a.Label(), r.s.Duration, r.s.Lead))
	p := PhaseResult{Variant: variant, Repeat: rep, Phase: PhaseMixed, Arm: a.Arm.Name, PI: a.PI, Intensity: intensity, Start: time.Now()}
	b, err := r.build(variant)
	if err != nil {
		p.Errors = append(p.Errors, fmt.Sprintf("build testbed: %v", err))
		return p
	}
	defer b.close()
	all := make([]int, len(r.s.Workloads))
	for i := range all {
		all[i] = i
	}
	var collected []json.RawMessage
	errs := r.armed(ctx, b, variant, intensity, &a, &collected, func(wraps map[string][]string) {
		p = r.phase(ctx, b, p, all, wraps, r.s.Duration, r.s.Lead)
	})
	p.Collected = collected
	p.Errors = append(p.Errors, errs...)
	fmt.Fprintf(r.progress, "    %s\n", r.brief(&p))
	time.Sleep(r.s.Settle)
	return p
}

// phase runs the workloads idx at once: background ones start at once and
// run lead longer, the others start after lead, so that the link is busy
// when they start. Every phase measures the same window of the link's
// time, [lead, lead+d]: background leaves the lead out as warmup.
//
// p names the phase; its intensity, if set, is given to the foreground
// workloads that take one (pulse, rr).
func (r *runner) phase(ctx context.Context, b *bed, p PhaseResult, idx []int,
	wraps map[string][]string, d, lead time.Duration) PhaseResult {
	p.Start, p.Workloads = time.Now(), map[string]workload.Result{}
	var gen []string
	if r.opts.LanesBin != "" {
		gen = []string{r.opts.LanesBin, "bench", "gen"}
	}
	// The link's trace and schedule start afresh with the phase: an
	// arm's set-up (a daemon's start) takes time the reference phases'
	// does not, and the phases would meet different spans of the link.
	for i, em := range b.ems {
		if o := em.Restart(); i == 0 {
			p.LinkOrigin = o // the series and the report are the first path's
		}
		em.ResetLateness()
	}
	before := b.ems[0].Stats()
	var mu sync.Mutex
	var wg sync.WaitGroup
	run := func(i int, d time.Duration) {
		defer wg.Done()
		w := r.s.Workloads[i]
		if !w.KeepCC {
			w.Spec = r.s.WorkloadFor(p.Variant, w.Spec)
		}
		if a := r.s.arm(p.Arm); a != nil {
			if cc, ok := a.CC[w.Spec.Name]; ok {
				w.Spec.CC = cc
			}
		}
		if w.Role == Background {
			w.Spec.Warmup = lead // measured over the others' window
		}
		if w.Role == Foreground && p.Intensity > 0 && (w.Spec.Kind == workload.Pulse || w.Spec.Kind == workload.ReqResp) {
			w.Spec.Intensity = p.Intensity / 100
		}
		env := workload.Env{Topo: b.topo, Wrap: wraps[w.Spec.Name], Gen: gen, Index: i, Logf: r.logf}
		res, err := workload.Run(ctx, env, w.Spec, d)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			p.Errors = append(p.Errors, err.Error())
			return
		}
		p.Workloads[w.Spec.Name] = res
	}
	for _, i := range idx {
		if r.s.Workloads[i].Role == Background {
			wg.Add(1)
			go run(i, d+lead)
		}
	}
	select {
	case <-time.After(lead):
	case <-ctx.Done():
	}
	for _, i := range idx {
		if r.s.Workloads[i].Role != Background {
			wg.Add(1)
			go run(i, d)
		}
	}
	wg.Wait()
	p.Seconds = time.Since(p.Start).Seconds()
	after := b.ems[0].Stats()
	p.Link = linkem.Report{Up: delta(before.Up, after.Up), Down: delta(before.Down, after.Down)}
	// The throughput series from the phase's start on, on the emulator's
	// clock (its steps and outages count from LinkOrigin on it).
	first := int(p.LinkOrigin / linkem.SeriesStep)
	p.SeriesStart = time.Duration(first) * linkem.SeriesStep
	for _, st := range []*linkem.DirStats{&p.Link.Up, &p.Link.Down} {
		st.Series = st.Series[min(first, len(st.Series)):]
	}
	sort.Strings(p.Errors)
	return p
}

func delta(a, b linkem.DirStats) linkem.DirStats {
	b.PacketsIn -= a.PacketsIn
	b.BytesIn -= a.BytesIn
	b.Lost -= a.Lost
	b.Dropped -= a.Dropped
	b.Delivered -= a.Delivered
	b.BytesDelivered -= a.BytesDelivered
	return b
}

func (r *runner) brief(p *PhaseResult) string {
	var parts []string
	for _, w := range r.s.Workloads {
		res, ok := p.Workloads[w.Spec.Name]
		if !ok {
			continue
		}
		s := fmt.Sprintf("%s %.2f Mbit/s", w.Spec.Name, res.Throughput/1e6)
		if res.LatencyP50 > 0 {
			s = fmt.Sprintf("%s p50/p99 %.1f/%.1f ms", w.Spec.Name, float64(res.LatencyP50)/1e6, float64(res.LatencyP99)/1e6)
			if res.Throughput > 0 && w.Spec.Kind != workload.IRTT {
				s += fmt.Sprintf(" %.2f Mbit/s", res.Throughput/1e6)
			}
		}
		if res.Retransmits > 0 {
			s += fmt.Sprintf(" (%d resent)", res.Retransmits)
		}
		parts = append(parts, s)
	}
	for _, e := range p.Errors {
		parts = append(parts, "ERROR "+e)
	}
	parts = append(parts, fmt.Sprintf("link drops up/down %d/%d, lateness p99 %v/%v", p.Link.Up.Dropped, p.Link.Down.Dropped,
		p.Link.Up.Lateness.P99.Round(time.Microsecond), p.Link.Down.Lateness.P99.Round(time.Microsecond)))
	return strings.Join(parts, "; ")
}

// vars are the variables arm commands and wrappers may use; $PI only in
// arm runs that sweep it, $INTENSITY (percent) only in a matrix.
func (r *runner) vars(t *netns.Topology, variant string, intensity float64, pi string) map[string]string {
	v := map[string]string{}
	for k, x := range r.s.Vars {
		v[k] = x
	}
	if pi != "" {
		v["PI"] = pi
	}
	if intensity > 0 {
		v["INTENSITY"] = strconv.FormatFloat(intensity, 'f', -1, 64)
	}
	for i, p := range t.Paths {
		suf := strconv.Itoa(i)
		for k, x := range map[string]string{"SRC_DEV": p.SrcDev, "DST_DEV": p.DstDev, "RTR_SRC_DEV": p.RtrSrcDev,
			"RTR_DST_DEV": p.RtrDstDev, "SRC_ADDR": p.SrcAddr.String(), "DST_ADDR": p.DstAddr.String()} {
			v[k+suf] = x
			if i == 0 {
				v[k] = x
			}
		}
	}
	for _, dir := range []string{"up", "down"} {
		c, _ := r.s.LinkConfig(variant, dir)
		v["RATE_"+strings.ToUpper(dir)] = strconv.FormatUint(c.Rate, 10)
	}
	v["LANES"] = r.opts.LanesBin
	v["LANESD"] = ""
	if r.opts.LanesBin != "" {
		v["LANESD"] = filepath.Join(filepath.Dir(r.opts.LanesBin), "lanesd")
	}
	v["PREFIX"] = t.Prefix
	v["SCENARIO_DIR"], _ = filepath.Abs(filepath.Dir(r.s.Path))
	for i, w := range r.s.Workloads {
		port := w.Spec.Port
		if port == 0 {
			port = 5201 + 10*i
		}
		v["PORT_"+strings.ReplaceAll(w.Spec.Name, "-", "_")] = strconv.Itoa(port)
	}
	return v
}

func expand(s string, vars map[string]string) (string, error) {
	var missing []string
	out := os.Expand(s, func(k string) string {
		x, ok := vars[k]
		if !ok {
			missing = append(missing, "$"+k)
		}
		return x
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%q: unknown variable(s) %s", s, strings.Join(missing, ", "))
	}
	return out, nil
}

func nsName(t *netns.Topology, ns string) string {
	switch ns {
	case "src":
		return t.Src
	case "dst":
		return t.Dst
	case "rtr":
		return t.Paths[0].Router
	}
	i, _ := strconv.Atoi(strings.TrimPrefix(ns, "rtr"))
	return t.Paths[i].Router
}

func (r *runner) command(ctx context.Context, t *netns.Topology, c Command, vars map[string]string) error {
	cmd, err := expand(c.Cmd, vars)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := netns.Command(ctx, nsName(t, c.NS), "sh", "-c", cmd).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %s: %v: %s", c.NS, cmd, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// services starts long-running commands and returns a function that
// stops them.
func (r *runner) services(ctx context.Context, t *netns.Topology, cs []Command, vars map[string]string) (func(), error) {
	var cmds []*exec.Cmd
	stop := func() {
		for _, c := range cmds {
			c.Process.Signal(os.Interrupt)
		}
		for _, c := range cmds {
			done := make(chan struct{})
			go func() { c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				c.Process.Kill()
				<-done
			}
		}
	}
	for _, c := range cs {
		line, err := expand(c.Cmd, vars)
		if err != nil {
			stop()
			return nil, err
		}
		cmd := netns.Command(ctx, nsName(t, c.NS), "sh", "-c", "exec "+line)
		if err := cmd.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("start %s: %w", line, err)
		}
		cmds = append(cmds, cmd)
	}
	if len(cmds) > 0 {
		time.Sleep(time.Second) // let services come up
		for _, c := range cmds {
			if c.ProcessState != nil {
				stop()
				return nil, fmt.Errorf("service %s exited", c.Path)
			}
		}
	}
	return stop, nil
}

func host() Host {
	h := Host{CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	return h
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func describeLink(l LinkSpec) string {
	var p []string
	if l.Trace != "" {
		p = append(p, "trace "+l.Trace)
	}
	if l.Rate != "" {
		p = append(p, l.Rate)
	}
	if len(l.Steps) > 0 {
		var st []string
		for _, x := range l.Steps {
			st = append(st, x[1]+" from "+x[0])
		}
		p = append(p, fmt.Sprintf("steps %s, every %s", strings.Join(st, ", "), l.StepsPeriod))
	}
	if l.Delay != "" {
		p = append(p, "delay "+l.Delay)
	}
	if l.QueuePackets > 0 {
		p = append(p, fmt.Sprintf("FIFO %d packets", l.QueuePackets))
	}
	if l.QueueBytes > 0 {
		p = append(p, fmt.Sprintf("FIFO %d bytes", l.QueueBytes))
	}
	if l.Loss > 0 {
		p = append(p, fmt.Sprintf("loss %g", l.Loss))
	}
	if l.Burst != nil {
		p = append(p, fmt.Sprintf("Gilbert-Elliott p=%g r=%g", l.Burst.P, l.Burst.R))
	}
	if len(l.Down) > 0 {
		p = append(p, fmt.Sprintf("outages %v", l.Down))
	}
	if l.OnOff != nil {
		p = append(p, fmt.Sprintf("on/off mean %s/%s", l.OnOff.MeanUp, l.OnOff.MeanDown))
	}
	if len(p) == 0 {
		return "unlimited"
	}
	return strings.Join(p, ", ")
}

package execspeed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/internal/rtthread"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/testbed/netns"
)

const port = 5600

// Experiment runs the parts asked for and writes the results into
// opts.OutDir.
func Experiment(ctx context.Context, opts Options) (*Results, error) {
	if err := opts.defaults(); err != nil {
		return nil, fmt.Errorf("execspeed: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("execspeed: needs root (network namespaces, cgroups)")
	}
	if opts.LanesBin == "" {
		return nil, errors.New("execspeed: the lanes binary is not known (Options.LanesBin)")
	}
	if opts.LanesdBin == "" {
		opts.LanesdBin = filepath.Join(filepath.Dir(opts.LanesBin), "lanesd")
	}
	if _, err := os.Stat(opts.LanesdBin); err != nil {
		return nil, fmt.Errorf("execspeed: lanesd: %w", err)
	}
	unlock, err := netns.LockHost(ctx, func() {
		fmt.Fprintf(opts.Progress, "execspeed: waiting for another testbed user (%s)\n", netns.LockPath)
	})
	if err != nil {
		return nil, fmt.Errorf("execspeed: %w", err)
	}
	defer unlock()
	x := &run{opts: opts, ncpu: cpu.OnlineCPUs()}
	x.res = &Results{Started: time.Now().UTC(), Work: opts.Work, Hogs: 2 * x.ncpu,
		Host: fmt.Sprintf("Linux %s, %d CPUs", features.KernelRelease(), x.ncpu)}
	if x.dir, err = os.MkdirTemp("", "lanes-execspeed-"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(x.dir)
	if x.pair, err = netns.NewDirect(opts.Logf); err != nil {
		return nil, fmt.Errorf("execspeed: %w", err)
	}
	defer x.pair.Close()
	x.addr = fmt.Sprintf("%s:%d", x.pair.DstAddr, port)
	has := func(p string) bool {
		for _, q := range opts.Parts {
			if q == p {
				return true
			}
		}
		return false
	}
	if err := x.sweep(ctx, has(PartFigure4), has(PartHist)); err != nil {
		return x.res, fmt.Errorf("execspeed: %w", err)
	}
	if has(PartHold) {
		if err := x.hold(ctx); err != nil {
			return x.res, fmt.Errorf("execspeed: hold: %w", err)
		}
	}
	if has(PartReserve) {
		x.reserve(ctx)
	}
	return x.res, x.res.Write(opts.OutDir)
}

type run struct {
	opts Options
	ncpu int
	dir  string
	pair *netns.Direct
	addr string
	res  *Results
	// speedShare, set by the send_rate arm, words the share lanesd
	// gave at the end of the run.
	speedShare func() string
}

func (x *run) progress(format string, args ...any) {
	fmt.Fprintf(x.opts.Progress, "execspeed: "+format+"\n", args...)
}

// proc is a process the experiment started and kills at the end.
type proc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
}

func (x *run) start(ctx context.Context, ns string, env []string, args ...string) (*proc, error) {
	p := &proc{}
	if ns != "" {
		p.cmd = netns.Command(ctx, ns, args[0], args[1:]...)
	} else {
		p.cmd = exec.CommandContext(ctx, args[0], args[1:]...)
	}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *proc) kill() {
	if p != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second): // a process that cannot exit is not the experiment's to wait for
		}
	}
}

// pid is the process to measure and move: the sender itself, not the
// nsenter that starts it (nsenter execs, so they are the same).
func (p *proc) pid() int { return p.cmd.Process.Pid }

func (x *run) sender(ctx context.Context, secs int, then ...int) (*proc, error) {
	args := []string{x.opts.LanesBin, "bench", "execspeedproc", "send", x.addr, strconv.Itoa(x.opts.Work), strconv.Itoa(secs)}
	for _, n := range then { // work2, after
		args = append(args, strconv.Itoa(n))
	}
	return x.start(ctx, x.pair.Src, []string{"GOMAXPROCS=1"}, args...)
}

func (x *run) spinner(ctx context.Context, secs int) (*proc, error) {
	return x.start(ctx, "", []string{"GOMAXPROCS=1"}, x.opts.LanesBin, "bench", "execspeedproc", "spin", strconv.Itoa(secs))
}

// receiver records arrivals in the destination namespace until stopped.
type receiver struct {
	a    *Arrivals
	err  error
	done chan struct{}
	stop context.CancelFunc
}

func (x *run) receive(ctx context.Context, d time.Duration) *receiver {
	rctx, cancel := context.WithCancel(ctx)
	r := &receiver{a: &Arrivals{Start: time.Now()}, done: make(chan struct{}), stop: cancel}
	go func() {
		defer close(r.done)
		r.err = netns.Do(x.pair.Dst, func() error {
			// The receiver is the instrument: real-time priority, so
			// that the busy loops of the hold and the sender itself do
			// not make it drop what arrives.
			attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: instrumentPriority}
			if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
				x.opts.Logf("receiver: SCHED_FIFO: %v", err)
			}
			return ReceiveInto(rctx, x.addr, d, true, r.a)
		})
	}()
	time.Sleep(100 * time.Millisecond) // listening before the sender starts
	return r
}

func (r *receiver) wait() (*Arrivals, error) {
	<-r.done
	r.stop()
	return r.a, r.err
}

// interval is a measured stretch, relative to the receiver's start.
type interval struct {
	from, to time.Duration
	cpu      time.Duration
}

// sweep runs the open-loop parts: the free rate, Figure 4 and the
// histograms, with one sender in a group of the experiment's own whose
// CFS quota it sets with lanes' cpu package.
func (x *run) sweep(ctx context.Context, figure4, hist bool) error {
	total := 4*time.Second + time.Duration(len(x.opts.Shares))*(x.opts.Point+time.Second) + time.Duration(len(x.opts.HistShares))*2*(3*time.Second) + 5*time.Second
	g, e, removeGroup, err := x.group()
	if err != nil {
		return err
	}
	r := x.receive(ctx, total)
	s, err := x.sender(ctx, int(total.Seconds())+1)
	if err != nil {
		r.stop()
		removeGroup()
		return err
	}
	defer func() {
		s.kill()
		removeGroup()
	}()
	time.Sleep(200 * time.Millisecond)
	if err := g.AddProc(s.pid()); err != nil {
		return fmt.Errorf("move the sender: %w", err)
	}
	measure := func(d time.Duration) (interval, error) {
		c0, err := procfs.CPUClock(s.pid())
		if err != nil {
			return interval{}, fmt.Errorf("sender: %w (%s)", err, s.stderr.String())
		}
		from := time.Since(r.a0())
		time.Sleep(d)
		c1, _ := procfs.CPUClock(s.pid())
		return interval{from: from, to: time.Since(r.a0()), cpu: c1 - c0}, nil
	}
	setShare := func(share float64, period time.Duration) error {
		c := lane.CPU{CapPercent: share / float64(x.ncpu), CapPeriod: period}
		if share >= 100*float64(x.ncpu) {
			c = lane.CPU{}
		}
		if err := e.Apply(g, c); err != nil {
			return err
		}
		time.Sleep(time.Second)
		return nil
	}
	var free interval
	var points []interval
	type histRun struct {
		share  float64
		period time.Duration
		iv     interval
	}
	var hists []histRun
	if err := setShare(100*float64(x.ncpu), 0); err != nil {
		return err
	}
	if free, err = measure(2 * time.Second); err != nil {
		return err
	}
	if figure4 {
		for _, sh := range x.opts.Shares {
			if err := setShare(sh, cpuPeriod); err != nil {
				return err
			}
			iv, err := measure(x.opts.Point)
			if err != nil {
				return err
			}
			points = append(points, iv)
			x.progress("figure 4: share %g %% measured", sh)
		}
	}
	if hist {
		for _, sh := range x.opts.HistShares {
			for _, per := range []time.Duration{cpuPeriod, cpu.Period} {
				if err := setShare(sh, per); err != nil {
					return err
				}
				iv, err := measure(2 * time.Second)
				if err != nil {
					return err
				}
				hists = append(hists, histRun{sh, per, iv})
			}
		}
	}
	s.kill()
	r.stop()
	a, err := r.wait()
	if err != nil && len(a.At) == 0 {
		return fmt.Errorf("receiver: %v", err)
	}
	mbps := func(iv interval) float64 { return a.Rate(iv.from, iv.to) / 1e6 }
	x.res.Free = mbps(free)
	x.progress("free-running sender: %.1f Mbit/s", x.res.Free)
	var xs, ys []float64
	for i, iv := range points {
		p := Point{Share: x.opts.Shares[i], Mbps: mbps(iv), Use: 100 * iv.cpu.Seconds() / (iv.to - iv.from).Seconds()}
		x.res.Figure4 = append(x.res.Figure4, p)
		xs, ys = append(xs, p.Share), append(ys, p.Mbps)
	}
	if len(xs) >= 2 {
		f, err := LineFit(xs, ys)
		if err == nil {
			x.res.Fit = &f
			x.progress("figure 4: R² %.4f", f.R2)
		}
	}
	bin := time.Millisecond
	for _, hr := range hists {
		gaps := a.Gaps(hr.iv.from, hr.iv.to)
		us := make([]float64, len(gaps))
		var long []time.Duration
		var longTime time.Duration
		for i, g := range gaps {
			us[i] = float64(g.Microseconds())
			if g >= bin {
				long = append(long, g)
				longTime += g
			}
		}
		h := Hist{Share: hr.share, Period: hr.period.String(), Bin: bin.String(),
			Shares: Histogram(long, bin, 100*time.Millisecond), Median: quantile(us, 0.5), Max: quantile(us, 1),
			Delayed: longTime.Seconds() / (hr.iv.to - hr.iv.from).Seconds()}
		if len(gaps) > 0 {
			h.Long = float64(len(long)) / float64(len(gaps))
		}
		x.res.Hists = append(x.res.Hists, h)
	}
	return nil
}

// cpuPeriod is the quota period cpu.send_rate uses.
const cpuPeriod = 10 * time.Millisecond

// a0 is the receiver's start (arrivals are relative to it).
func (r *receiver) a0() time.Time { return r.a.Start }

// lanesd is a lanesd of the experiment's own.
type lanesd struct {
	p      *proc
	c      *client.Client
	socket string
}

func (x *run) lanesd(ctx context.Context, name, config string, flags ...string) (*lanesd, error) {
	dir := filepath.Join(x.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	socket := filepath.Join(dir, "lanes.sock")
	cfg := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n\n%s", socket, filepath.Join(dir, "state"), config)
	if err := os.WriteFile(filepath.Join(dir, "lanes.toml"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	p, err := x.start(ctx, x.pair.Src, nil, append([]string{x.opts.LanesdBin, "--config", filepath.Join(dir, "lanes.toml")}, flags...)...)
	if err != nil {
		return nil, err
	}
	d := &lanesd{p: p, c: client.New(socket), socket: socket}
	for deadline := time.Now().Add(20 * time.Second); !d.c.Alive(ctx); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.kill()
			return nil, fmt.Errorf("lanesd not answering: %s", p.stderr.String())
		}
	}
	return d, nil
}

func (d *lanesd) stop() {
	d.p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		d.p.kill()
	}
}

// hold runs the sender at a target rate under cpu.send_rate, then at the
// fixed share Figure 4's line gives, with busy loops through the middle
// third of each run and the sender's cost up by half in the last third
// (its data got harder to compress).
func (x *run) hold(ctx context.Context) error {
	if x.res.Free == 0 {
		return errors.New("no free rate measured (run figure4 too)")
	}
	target := x.opts.Target * x.res.Free * 1e6 // bits per second
	secs := int(x.opts.Hold.Seconds())
	runOne := func(arm string, place func(pid int) (string, func(), error)) error {
		r := x.receive(ctx, x.opts.Hold+3*time.Second)
		// The sender starts about 0.3 s before the run's clock.
		s, err := x.sender(ctx, secs+3, x.opts.Work*3/2, int(math.Round(x.opts.Hold.Seconds()*2/3))+1)
		if err != nil {
			r.stop()
			return err
		}
		defer s.kill()
		time.Sleep(200 * time.Millisecond)
		share, undo, err := place(s.pid())
		if err != nil {
			r.stop()
			return err
		}
		defer undo()
		t0 := time.Since(r.a0())
		time.Sleep(x.opts.Hold / 3)
		var hogs []*proc
		for range 2 * x.ncpu {
			h, err := x.spinner(ctx, int(x.opts.Hold.Seconds()/3)+1)
			if err != nil {
				return err
			}
			hogs = append(hogs, h)
		}
		time.Sleep(x.opts.Hold / 3)
		for _, h := range hogs {
			h.kill()
		}
		time.Sleep(x.opts.Hold - 2*(x.opts.Hold/3))
		if share == "" {
			share = "(lanesd)"
		}
		if st := x.speedShare; st != nil {
			share = st()
			x.speedShare = nil
		}
		s.kill()
		r.stop()
		a, err := r.wait()
		if err != nil && len(a.At) == 0 {
			return fmt.Errorf("receiver: %v", err)
		}
		h := Hold{Arm: arm, Target: target / 1e6, Share: share}
		for i := 0; i < secs; i++ {
			from := t0 + time.Duration(i)*time.Second
			h.Seconds = append(h.Seconds, a.Rate(from, from+time.Second)/1e6)
		}
		h.Mean, h.Worst = HoldStats(h.Seconds, h.Target)
		x.res.Holds = append(x.res.Holds, h)
		x.progress("hold %s: mean %.1f Mbit/s for %.1f, worst 5 s mean %.1f %% off", arm, h.Mean, h.Target, 100*h.Worst)
		return nil
	}
	// cpu.send_rate.
	d, err := x.lanesd(ctx, "hold", fmt.Sprintf("[lanes.send]\ncpu.send_rate = \"%dkbit\"\n", int(target/1000)))
	if err != nil {
		return err
	}
	err = runOne("send_rate", func(pid int) (string, func(), error) {
		if _, err := d.c.Move(ctx, "send", pid); err != nil {
			return "", func() {}, err
		}
		x.speedShare = func() string {
			st, err := d.c.Status(ctx)
			if err != nil || len(st.Speed) != 1 {
				return "(lanesd)"
			}
			return fmt.Sprintf("moved by lanesd (%.1f %% at the end)", st.Speed[0].Share)
		}
		return "", func() {}, nil
	})
	d.stop()
	if err != nil {
		return err
	}
	// The baseline: the share Figure 4's line gives, fixed.
	if x.res.Fit == nil || x.res.Fit.Slope <= 0 {
		return nil
	}
	share := math.Min(100, math.Max(1, (target/1e6-x.res.Fit.Intercept)/x.res.Fit.Slope))
	g, e, removeGroup, err := x.group()
	if err != nil {
		return err
	}
	defer removeGroup()
	return runOne("fixed share", func(pid int) (string, func(), error) {
		// The seed's regulation: the share guaranteed (the highest
		// weight) and capped, as lanesd's controller sets it, but fixed.
		if err := e.Apply(g, lane.CPU{Weight: 10000, CapPercent: share / float64(x.ncpu), CapPeriod: cpuPeriod}); err != nil {
			return "", func() {}, err
		}
		if err := g.AddProc(pid); err != nil {
			return "", func() {}, err
		}
		return fmt.Sprintf("%.1f %% of a CPU, fixed", share), func() {}, nil
	})
}

// reserveArms are the reservation arms: a lane's cpu.reserve (none: the
// baseline), lanesd's --reserve-mechanism and its --reserve-tick-assist
// (the CFS arms with it at its default and off, side by side).
var reserveArms = []struct{ name, reserve, mech, assist string }{
	{"none", "", "auto", "auto"},
	{"20% cfs", "20%", "cfs", "auto"},
	{"20% cfs, tick assist off", "20%", "cfs", "off"},
	{"20% deadline", "20%", "deadline", "auto"},
	{"20ms/100ms cfs", "20ms/100ms", "cfs", "auto"},
	{"20ms/100ms cfs, tick assist off", "20ms/100ms", "cfs", "off"},
	{"20ms/100ms deadline", "20ms/100ms", "deadline", "auto"},
}

// reserve measures a busy loop's share of a CPU in every 100 ms window
// in a reserved lane against busy loops, for each arm.
func (x *run) reserve(ctx context.Context) {
	for _, arm := range reserveArms {
		res := Reserve{Arm: arm.name}
		if err := x.reserveArm(ctx, arm.reserve, arm.mech, arm.assist, &res); err != nil {
			res.Error = err.Error()
		}
		x.res.Reserve = append(x.res.Reserve, res)
		mean, lo, hi, in2, _ := WindowStats(res.Windows, 4)
		x.progress("reserve %s (%s): alone %.1f %%, windows mean %.1f min %.1f max %.1f, %.0f %% within ±2; the busy loops %.1f %%, the tick assist %.2f %% of a CPU %s",
			arm.name, res.Mechanism, res.Alone, mean, lo, hi, in2, res.Others, res.Assist, res.Error)
	}
}

func (x *run) reserveArm(ctx context.Context, reserve, mech, assist string, res *Reserve) error {
	cfg := "[lanes.rsv]\ncpu.weight = 100\n"
	if reserve != "" {
		cfg = fmt.Sprintf("[lanes.rsv]\ncpu.reserve = %q\n", reserve)
	}
	d, err := x.lanesd(ctx, "reserve", cfg, "--reserve-mechanism", mech, "--reserve-tick-assist", assist)
	if err != nil {
		return err
	}
	defer d.stop()
	secs := int(float64(x.opts.Windows)/10) + 20
	loop, err := x.spinner(ctx, secs)
	if err != nil {
		return err
	}
	defer loop.kill()
	time.Sleep(200 * time.Millisecond)
	res.Mechanism = "none: in the default lane with the busy loops"
	if reserve != "" {
		if _, err := d.c.Move(ctx, "rsv", loop.pid()); err != nil {
			return err
		}
	}
	time.Sleep(1500 * time.Millisecond)
	alone, err := Windows(loop.pid(), 10)
	if err != nil {
		return err
	}
	sort.Float64s(alone)
	res.Alone = alone[len(alone)/2]
	var hogs []*proc
	defer func() {
		for _, h := range hogs {
			h.kill()
		}
	}()
	for range 2 * x.ncpu {
		h, err := x.spinner(ctx, secs)
		if err != nil {
			return err
		}
		hogs = append(hogs, h)
	}
	time.Sleep(1500 * time.Millisecond)
	// What the busy loops and the tick assist got over the windows: the
	// assist's cost, paid by the loops.
	others := func() (sum time.Duration) {
		for _, h := range hogs {
			if c, err := procfs.CPUClock(h.pid()); err == nil {
				sum += c
			}
		}
		return sum
	}
	assisted := func() time.Duration {
		if st, err := d.c.Status(ctx); err == nil && st.ReserveAssist != nil {
			return st.ReserveAssist.CPUTime
		}
		return 0
	}
	o0, a0, w0 := others(), assisted(), time.Now()
	if res.Windows, err = Windows(loop.pid(), x.opts.Windows); err != nil {
		return err
	}
	o1, a1, wall := others(), assisted(), time.Since(w0)
	res.Others = 100 * float64(o1-o0) / float64(wall)
	res.Assist = 100 * float64(a1-a0) / float64(wall)
	if st, err := d.c.Status(ctx); err == nil && len(st.Reserve) == 1 {
		res.Mechanism = st.Reserve[0].Mechanism
		if a := st.ReserveAssist; a != nil && st.Reserve[0].Mechanism == "CFS bandwidth" {
			res.TickAssist = "off"
			if a.Every > 0 {
				res.TickAssist = fmt.Sprintf("every %v on CPUs %v", a.Every, a.CPUs)
			}
			if a.Error != "" {
				res.TickAssist = "failed: " + a.Error
			}
		}
	}
	return nil
}

// instrumentPriority is the SCHED_FIFO priority of the benchmark's
// instruments (the receiver, the windows' reader): above the tick assist
// and any lane.
const instrumentPriority = 10

// Windows measures a process's CPU in n consecutive windows of 100 ms,
// in percent of one CPU, pairing each CPU-clock reading with the wall
// clock within 50 µs. The instrument runs at SCHED_FIFO and sleeps to
// absolute times, so that its windows are 100 ms however busy the CPUs
// are (a late reading would make the next window longer and straddle one
// more of the reservation's periods).
func Windows(pid, n int) ([]float64, error) {
	read := func() (time.Duration, time.Time, error) {
		for try := 0; ; try++ {
			t0 := time.Now()
			c, err := procfs.CPUClock(pid)
			t1 := time.Now()
			if err != nil {
				return 0, t1, err
			}
			if t1.Sub(t0) < 50*time.Microsecond || try == 50 {
				return c, t1, nil
			}
		}
	}
	out := make([]float64, n)
	err := rtthread.Run(instrumentPriority, func(sleepUntil func(time.Time)) error {
		c0, w0, err := read()
		if err != nil {
			return err
		}
		start := w0
		for i := range out {
			sleepUntil(start.Add(time.Duration(i+1) * 100 * time.Millisecond))
			c1, w1, err := read()
			if err != nil {
				return err
			}
			out[i] = 100 * float64(c1-c0) / float64(w1.Sub(w0))
			c0, w0 = c1, w1
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// group makes the experiment's own cgroup, whose CPU settings it sets
// with lanes' cpu package, and returns it with what removes it (retried
// for up to 5 s while its processes exit).
func (x *run) group() (cgroup.Group, *cpu.Enforcer, func(), error) {
	h, err := cgroup.Detect()
	if err != nil {
		return cgroup.Group{}, nil, nil, err
	}
	e, err := cpu.New(h, x.opts.Logf)
	if err != nil {
		return cgroup.Group{}, nil, nil, err
	}
	g := h.Group(fmt.Sprintf("lanes-bench-es%d", os.Getpid()))
	if _, err := g.Create(); err != nil {
		return cgroup.Group{}, nil, nil, err
	}
	remove := func() {
		for deadline := time.Now().Add(5 * time.Second); g.Remove() != nil && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return g, e, remove, nil
}

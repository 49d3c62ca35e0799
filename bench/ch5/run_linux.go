package ch5

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/netns"
)

const (
	videoPort = 5400
	bulkPort  = 5401
	videoLane = "video"
)

// Run runs the experiment's arms one after the other, each on a fresh
// topology, and writes ch5.json, ch5.md and ch5.svg into opts.OutDir. An
// arm that fails is recorded with its error; the others still run.
func Run(ctx context.Context, opts Options) (*Results, error) {
	if err := opts.defaults(); err != nil {
		return nil, fmt.Errorf("ch5: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("ch5: needs root (network namespaces, cgroups, tc)")
	}
	if opts.LanesBin == "" {
		return nil, errors.New("ch5: the lanes binary is not known (Options.LanesBin)")
	}
	if opts.LanesdBin == "" {
		opts.LanesdBin = filepath.Join(filepath.Dir(opts.LanesBin), "lanesd")
	}
	arms := Arms
	if len(opts.Arms) > 0 {
		arms = nil
		for _, n := range opts.Arms {
			a, _ := armByName(n)
			arms = append(arms, a)
		}
	}
	for _, a := range arms {
		if a.Config == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(opts.ConfigDir, a.Config)); err != nil {
			return nil, fmt.Errorf("ch5: arm %s: %w", a.Name, err)
		}
		if _, err := os.Stat(opts.LanesdBin); err != nil {
			return nil, fmt.Errorf("ch5: arm %s needs lanesd: %w", a.Name, err)
		}
	}
	for _, tool := range []string{"stress-ng", "iperf3", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("ch5: %s: %w", tool, err)
		}
	}
	unlock, err := netns.LockHost(ctx, func() {
		fmt.Fprintf(opts.Progress, "ch5: waiting for another testbed user (%s)\n", netns.LockPath)
	})
	if err != nil {
		return nil, fmt.Errorf("ch5: %w", err)
	}
	defer unlock()
	res := &Results{Started: time.Now().UTC(), Duration: opts.Duration, Contention: opts.Contention,
		StressCPU: opts.StressCPU, Link: fmt.Sprintf("%d bit/s each way, %v one-way delay, %d-packet drop-tail queue", opts.LinkRate, opts.Delay, opts.Queue),
		Host: hostLine()}
	for _, a := range arms {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(opts.Progress, "ch5: arm %s (%v)\n", a.Name, opts.Duration)
		r := runArm(ctx, opts, a)
		r.Summary = Summarize(r, int(opts.Contention/time.Second))
		res.Arms = append(res.Arms, *r)
		fmt.Fprintf(opts.Progress, "ch5: arm %s: %s\n", a.Name, r.Summary.line())
		for _, e := range r.Errors {
			fmt.Fprintf(opts.Progress, "ch5: arm %s: ERROR %s\n", a.Name, e)
		}
	}
	if err := res.Write(opts.OutDir); err != nil {
		return res, err
	}
	var failed []string
	for _, a := range res.Arms {
		if len(a.Errors) > 0 {
			failed = append(failed, a.Arm)
		}
	}
	if len(failed) > 0 {
		return res, fmt.Errorf("ch5: arm(s) %s failed (results written)", strings.Join(failed, ", "))
	}
	return res, ctx.Err()
}

func (s Summary) line() string {
	return fmt.Sprintf("fps before %.1f, from contention+3s mean %.1f min %d (onset min %d), >=19 in %.0f%% of %d s, jitter %.1f ms, quality %.0f",
		s.FPSBefore, s.FPSDuring, s.FPSMin, s.OnsetMin, 100*s.Held, s.Seconds, s.JitterDuring, s.QualityDuring)
}

// proc is a process of an arm with its output collected.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

func start(ctx context.Context, ns, name string, argv ...string) (*proc, error) {
	p := &proc{name: name, cmd: netns.Command(ctx, ns, argv[0], argv[1:]...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Cancel = func() error { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop asks the process group to end (SIGTERM), then kills it after
// grace; it returns when the process has been reaped.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) wait(ctx context.Context, limit time.Duration) error {
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s: %v: %s", p.name, p.err, tail(p.stderr.String(), 400))
		}
		return nil
	case <-time.After(limit):
		p.stop(3 * time.Second)
		return fmt.Errorf("%s: still running after %v: killed", p.name, limit)
	case <-ctx.Done():
		p.stop(3 * time.Second)
		return ctx.Err()
	}
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

func runArm(ctx context.Context, opts Options, a Arm) *ArmResult {
	r := &ArmResult{Arm: a.Name, Description: a.Description, LoadStart: loadavg()}
	fail := func(err error) *ArmResult {
		r.Errors = append(r.Errors, err.Error())
		r.LoadEnd = loadavg()
		return r
	}
	topo, err := netns.New(1, opts.Logf)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := topo.Close(); err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
	}()
	path := topo.Paths[0]
	link := linkem.Config{Rate: opts.LinkRate, Delay: opts.Delay, QueuePackets: opts.Queue}
	em, err := linkem.Start(path.TunUp, path.TunDown, linkem.Options{Up: link, Down: link, Realtime: true, Logf: opts.Logf})
	if err != nil {
		return fail(fmt.Errorf("link emulator: %w", err))
	}
	defer em.Stop()

	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stop(5 * time.Second)
		}
	}()
	var wrap []string
	var socket string
	if a.Config != "" {
		dir, err := os.MkdirTemp("", "lanes-ch5-"+a.Name+"-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(dir)
		socket = filepath.Join(dir, "lanes.sock")
		cfg, err := writeConfig(filepath.Join(opts.ConfigDir, a.Config), filepath.Join(dir, "lanes.toml"), map[string]string{
			"IFACE": path.SrcDev, "SOCKET": socket, "STATE_DIR": filepath.Join(dir, "state"),
		})
		if err != nil {
			return fail(err)
		}
		d, err := start(ctx, topo.Src, "lanesd", opts.LanesdBin, "--config", cfg)
		if err != nil {
			return fail(err)
		}
		defer func() {
			d.stop(10 * time.Second)
			r.Lanesd = tail(d.stderr.String(), 4000)
		}()
		if err := waitDaemon(ctx, socket, d, 30*time.Second); err != nil {
			return fail(err)
		}
		wrap = []string{opts.LanesBin, "--socket", socket, "run", "-l", videoLane, "--"}
	}

	// Time zero: far enough ahead for both ends to start.
	t0 := time.Now().Add(2 * time.Second)
	dur := opts.Duration + 2*time.Second
	rc := ReceiverConfig{Listen: fmt.Sprintf("%s:%d", path.DstAddr, videoPort), Duration: dur, Start: t0.UnixNano()}
	sc := SenderConfig{To: fmt.Sprintf("%s:%d", path.DstAddr, videoPort), Duration: dur, Adapt: a.Adapt, Start: t0.UnixNano()}
	if socket != "" {
		rc.Socket = socket
		rc.Directives = a.Directives // relayed to the sender in the feedback datagrams
	}
	rj, _ := json.Marshal(rc)
	sj, _ := json.Marshal(sc)
	recv, err := start(ctx, topo.Dst, "receiver", append(append([]string(nil), wrap...), opts.LanesBin, "bench", "ch5video", "recv", string(rj))...)
	if err != nil {
		return fail(err)
	}
	procs = append(procs, recv)
	time.Sleep(300 * time.Millisecond)
	send, err := start(ctx, topo.Src, "sender", append(append([]string(nil), wrap...), opts.LanesBin, "bench", "ch5video", "send", string(sj))...)
	if err != nil {
		return fail(err)
	}
	procs = append(procs, send)

	// The host's CPU use, once a second, for the whole arm.
	busyCtx, stopBusy := context.WithCancel(ctx)
	var busyWG sync.WaitGroup
	busyWG.Add(1)
	go func() { defer busyWG.Done(); r.HostBusy = sampleBusy(busyCtx, t0, opts.Duration) }()
	defer func() { stopBusy(); busyWG.Wait() }()

	// The disturbance from t0+Contention: CPU hogs on both ends and a
	// greedy TCP flow src → dst over the same link.
	select {
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-time.After(time.Until(t0.Add(opts.Contention))):
	}
	left := opts.Duration - opts.Contention
	srv, err := start(ctx, topo.Dst, "iperf3 server", "iperf3", "-s", "-1", "-p", strconv.Itoa(bulkPort))
	if err != nil {
		return fail(err)
	}
	procs = append(procs, srv)
	if opts.StressCPU > 0 {
		for _, ns := range []string{topo.Src, topo.Dst} {
			p, err := start(ctx, ns, "stress-ng in "+ns, "stress-ng", "--cpu", strconv.Itoa(opts.StressCPU), "--timeout", strconv.Itoa(int(left/time.Second)+1)+"s", "--quiet")
			if err != nil {
				return fail(err)
			}
			procs = append(procs, p)
		}
	}
	time.Sleep(200 * time.Millisecond) // the iperf3 server listening
	bulk, err := start(ctx, topo.Src, "iperf3 client", "iperf3", "-c", path.DstAddr.String(), "-p", strconv.Itoa(bulkPort),
		"-t", strconv.Itoa(int(left/time.Second)), "-C", "cubic", "--connect-timeout", "3000")
	if err != nil {
		return fail(err)
	}
	procs = append(procs, bulk)

	for _, p := range []*proc{send, recv} {
		if err := p.wait(ctx, time.Until(t0.Add(dur))+20*time.Second); err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
	}
	if err := bulk.wait(ctx, 20*time.Second); err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	if err := decodeLines(&recv.stdout, &r.Receiver); err != nil {
		r.Errors = append(r.Errors, "receiver output: "+err.Error())
	}
	if err := decodeLines(&send.stdout, &r.Sender); err != nil {
		r.Errors = append(r.Errors, "sender output: "+err.Error())
	}
	if socket != "" {
		// What lanes' shaper did with the video and the bulk flow.
		out, err := netns.Command(ctx, topo.Src, "tc", "-s", "class", "show", "dev", path.SrcDev).CombinedOutput()
		r.TC = strings.TrimSpace(string(out))
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("tc -s class: %v", err))
		}
		out, _ = netns.Command(ctx, topo.Src, "tc", "-s", "qdisc", "show", "dev", path.SrcDev).CombinedOutput()
		r.TC += "\n" + strings.TrimSpace(string(out))
	}
	r.Receiver = window(r.Receiver, int(opts.Duration/time.Second))
	r.Sender = window(r.Sender, int(opts.Duration/time.Second))
	r.LoadEnd = loadavg()
	return r
}

// window keeps the seconds 0..n-1.
func window[T interface{ sec() int }](xs []T, n int) []T {
	var out []T
	for _, x := range xs {
		if s := x.sec(); s >= 0 && s < n {
			out = append(out, x)
		}
	}
	return out
}

func (r ReceiverSecond) sec() int { return r.T }
func (s SenderSecond) sec() int   { return s.T }

// writeConfig expands $VARS of a config template into dst.
func writeConfig(src, dst string, vars map[string]string) (string, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("lanesd config: %w", err)
	}
	var missing []string
	out := os.Expand(string(b), func(k string) string {
		v, ok := vars[k]
		if !ok {
			missing = append(missing, "$"+k)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("lanesd config %s: unknown variable(s) %s", src, strings.Join(missing, ", "))
	}
	if err := os.WriteFile(dst, []byte(out), 0o644); err != nil {
		return "", fmt.Errorf("lanesd config: %w", err)
	}
	return dst, nil
}

func waitDaemon(ctx context.Context, socket string, d *proc, limit time.Duration) error {
	c := client.New(socket)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-d.done:
			return fmt.Errorf("lanesd exited: %v: %s", d.err, tail(d.stderr.String(), 1000))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if c.Alive(ctx) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("lanesd not answering on %s after %v: %s", socket, limit, tail(d.stderr.String(), 1000))
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

// cpuTimes reads the host's busy and total jiffies from /proc/stat.
func cpuTimes() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, x := range f[1:] {
		v, _ := strconv.ParseUint(x, 10, 64)
		if i >= 8 { // guest time is already in user
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// sampleBusy records the host's CPU busy share in each second from t0
// for dur (at most dur/1s samples).
func sampleBusy(ctx context.Context, t0 time.Time, dur time.Duration) []float64 {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(time.Until(t0)):
	}
	var out []float64
	b0, t0j := cpuTimes()
	for i := 1; i <= int(dur/time.Second); i++ {
		select {
		case <-ctx.Done():
			return out
		case <-time.After(time.Until(t0.Add(time.Duration(i) * time.Second))):
		}
		b1, t1 := cpuTimes()
		if t1 > t0j {
			out = append(out, float64(b1-b0)/float64(t1-t0j))
		} else {
			out = append(out, 0)
		}
		b0, t0j = b1, t1
	}
	return out
}

func hostLine() string {
	var u syscall.Utsname
	syscall.Uname(&u)
	rel := make([]byte, 0, 65)
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	n := 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		n = strings.Count(string(b), "processor\t:")
	}
	return fmt.Sprintf("Linux %s, %d CPUs", rel, n)
}

package hotspot

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/rtthread"
	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/netns"
)

const port = 5500

// Experiment runs every arm at every hog count, Repeats times, each run on
// a fresh topology, and writes hotspot.json and hotspot.md into
// opts.OutDir. A run that fails is recorded with its error.
func Experiment(ctx context.Context, opts Options) (*Results, error) {
	if err := opts.defaults(); err != nil {
		return nil, fmt.Errorf("hotspot: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("hotspot: needs root (network namespaces, cgroups)")
	}
	if opts.LanesBin == "" {
		return nil, errors.New("hotspot: the lanes binary is not known (Options.LanesBin)")
	}
	if opts.LanesdBin == "" {
		opts.LanesdBin = filepath.Join(filepath.Dir(opts.LanesBin), "lanesd")
	}
	if _, err := os.Stat(opts.LanesdBin); err != nil {
		return nil, fmt.Errorf("hotspot: lanesd: %w", err)
	}
	for _, tool := range []string{"socat", "stress-ng", "taskset", "iperf3"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("hotspot: %s: %w (apt-get install socat stress-ng util-linux iperf3)", tool, err)
		}
	}
	unlock, err := netns.LockHost(ctx, func() {
		fmt.Fprintf(opts.Progress, "hotspot: waiting for another testbed user (%s)\n", netns.LockPath)
	})
	if err != nil {
		return nil, fmt.Errorf("hotspot: %w", err)
	}
	defer unlock()
	dir, err := os.MkdirTemp("", "lanes-hotspot-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := writeFiles(dir, opts.Size); err != nil {
		return nil, fmt.Errorf("hotspot: %w", err)
	}
	res := &Results{Started: time.Now().UTC(), Host: hostLine(),
		Setup: fmt.Sprintf("%.1f MB over %d bit/s, %v one-way delay, up and down exponential with means %v and %v (seed %d + repeat); "+
			"sender in lane sync capped at %g%% of one CPU in every %v, pinned with the hogs (stress-ng --cpu N) to CPU 0; socat's TLS (OpenSSL, TLS 1.3) from a file to the server's stdout",
			float64(opts.Size)/1e6, opts.Rate, opts.Delay, opts.MeanOn, opts.MeanOff, opts.Seed, opts.CapPct, capPeriod(opts))}
	crosses := []int{-1}
	if opts.Audio {
		crosses = opts.Cross
		res.Setup = fmt.Sprintf("%d-byte datagrams every %v for %v (the seed's audio-like application; jitter: sd of |inter-send − interval| at sendto) over %d bit/s, "+
			"up and down exponential with means %v and %v; cross traffic iperf3 UDP at a share of the link; sender and hogs in lane sync capped at %g%% of one CPU in every %v, pinned to CPU 0",
			audioBytes, audioInterval, opts.AudioDuration, opts.Rate, opts.MeanOn, opts.MeanOff, opts.CapPct, capPeriod(opts))
	}
	if opts.StartUp && !opts.Audio {
		res.Setup += "; the sender starts when the link is up (--start-up)"
	}
	if opts.SlowCPU > 0 {
		res.Setup = strings.Replace(res.Setup, fmt.Sprintf("capped at %g%% of one CPU in every %v", opts.CapPct, capPeriod(opts)),
			fmt.Sprintf("not capped, CPU 0 slowed to %g%% of its time (a SCHED_FIFO thread pinned to it spins for the rest of every millisecond)", opts.SlowCPU), 1)
	}
	for rep := 0; rep < opts.Repeats; rep++ {
		for _, cross := range crosses {
			for _, hogs := range opts.Hogs {
				for _, name := range opts.Arms {
					if ctx.Err() != nil {
						return res, ctx.Err()
					}
					a, _ := armByName(name)
					run := runOne(ctx, opts, dir, a, hogs, cross, rep, opts.Audio)
					res.Runs = append(res.Runs, run)
					what := fmt.Sprintf("%.1f s", run.Secs)
					if opts.Audio {
						what = fmt.Sprintf("%d%% cross traffic: send jitter %.0f µs", cross, run.JitterUS)
					}
					if run.Error != "" {
						fmt.Fprintf(opts.Progress, "hotspot: %s, %d hogs, repeat %d: ERROR %s\n", a.Name, hogs, rep, run.Error)
					} else {
						fmt.Fprintf(opts.Progress, "hotspot: %s, %d hogs, repeat %d: %s (%d contacts)\n", a.Name, hogs, rep, what, run.Contacts)
					}
				}
			}
		}
	}
	if err := res.Write(opts.OutDir); err != nil {
		return res, err
	}
	return res, nil
}

// writeFiles writes the payload and a self-signed certificate for the
// TLS server.
func writeFiles(dir string, size int64) error {
	payload := make([]byte, size)
	if _, err := rand.Read(payload); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "payload"), payload, 0o644); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lanes-hotspot"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	// socat takes the key and the certificate in one file.
	both := append(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	return os.WriteFile(filepath.Join(dir, "server.pem"), both, 0o600)
}

// proc is a started process of a run.
type proc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

// start runs argv in namespace ns with stdin from the file stdin ("":
// none) and stdout to stdout (nil: discarded).
func start(ctx context.Context, ns string, stdin string, stdout io.Writer, argv ...string) (*proc, error) {
	p := &proc{cmd: netns.Command(ctx, ns, argv[0], argv[1:]...), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	p.cmd.Stdout = stdout
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		p.cmd.Stdin = f
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Cancel = func() error { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// runOne is one run: topology, lanesd with the arm's policy, hogs, the
// oracle following the emulator's schedule, and the workload: the TLS
// transfer, or (audio) the audio sender beside cross traffic of cross
// percent of the link.
func runOne(ctx context.Context, opts Options, dir string, a Arm, hogs, cross, rep int, audio bool) (run Run) {
	run = Run{Arm: a.Name, Hogs: hogs, Repeat: rep}
	if audio {
		run.Cross = ptr(cross)
	}
	fail := func(err error) Run { run.Error = err.Error(); return run }
	topo, err := netns.New(1, opts.Logf)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := topo.Close(); err != nil && run.Error == "" {
			run.Error = err.Error()
		}
	}()
	path := topo.Paths[0]
	seed := opts.Seed + uint64(rep)
	link := func() linkem.Config {
		return linkem.Config{Rate: opts.Rate, Delay: opts.Delay, QueuePackets: 100,
			Schedule: linkem.NewExpSchedule(opts.MeanOn, opts.MeanOff, seed)}
	}
	em, err := linkem.Start(path.TunUp, path.TunDown, linkem.Options{Up: link(), Down: link(), Realtime: true, Logf: opts.Logf})
	if err != nil {
		return fail(fmt.Errorf("link emulator: %w", err))
	}
	t0 := time.Now()
	defer em.Stop()

	rdir, err := os.MkdirTemp(dir, a.Name+"-")
	if err != nil {
		return fail(err)
	}
	socket := filepath.Join(rdir, "lanes.sock")
	cfg := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n\n[lanes.sync]\n", socket, filepath.Join(rdir, "state"))
	if opts.SlowCPU > 0 {
		stop, err := slowCPU(0, opts.SlowCPU)
		if err != nil {
			return fail(fmt.Errorf("slow CPU: %w", err))
		}
		defer stop()
	} else {
		capKeys := fmt.Sprintf("cap = %g", opts.CapPct/float64(max(1, cpu.OnlineCPUs())))
		if opts.CapPeriod > 0 {
			capKeys += fmt.Sprintf(", cap_period = %q", opts.CapPeriod.String())
		}
		cfg += fmt.Sprintf("cpu = { %s }\n", capKeys)
	}
	// lanesd starts without the arm's boost; it is loaded once the hogs
	// run (below), so that they predate it, as a device's running work
	// predates its next contact. (Under from = "start" a process started
	// while lanesd waits for its first contact counts from its start.)
	if err := os.WriteFile(filepath.Join(rdir, "lanes.toml"), []byte(cfg), 0o644); err != nil {
		return fail(err)
	}
	d, err := start(ctx, topo.Src, "", nil, opts.LanesdBin, "--config", filepath.Join(rdir, "lanes.toml"))
	if err != nil {
		return fail(err)
	}
	// The boost events (each change of a process's nice, and the
	// contacts), a JSON line each, with the sender's pid: what lanesd
	// boosted, and when.
	var boosts lockedBuffer
	defer func() {
		// lanesd's log beside the results, and its boosts.
		d.kill()
		name := fmt.Sprintf("%s-%dhogs-%d", a.Name, hogs, rep)
		if audio {
			name = fmt.Sprintf("%s-%dhogs-%dcross-%d", a.Name, hogs, cross, rep)
		}
		if err := os.MkdirAll(filepath.Join(opts.OutDir, "logs"), 0o755); err == nil {
			// The run's temporary directory is gone: named, not given.
			log := bytes.ReplaceAll(d.stderr.Bytes(), []byte(dir+"/"), []byte("RUNDIR/"))
			os.WriteFile(filepath.Join(opts.OutDir, "logs", "lanesd-"+name+".log"), log, 0o644)
			if b := boosts.bytes(); len(b) > 0 {
				os.WriteFile(filepath.Join(opts.OutDir, "logs", "boost-"+name+".jsonl"), b, 0o644)
			}
		}
	}()
	c := client.New(socket)
	for deadline := time.Now().Add(20 * time.Second); !c.Alive(ctx); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("lanesd not answering: %s", tail(d.stderr.String(), 600)))
		}
	}
	lanesRun := []string{opts.LanesBin, "--socket", socket, "run", "-l", "sync", "--", "taskset", "-c", "0"}
	if a.Boost != "" {
		if st, err := c.Events(ctx, client.EventsQuery{Topics: []string{"boost.>"}, Follow: true}); err == nil {
			go func() { // ends with lanesd
				defer st.Close()
				for {
					if _, err := st.Next(); err != nil {
						return
					}
					boosts.line(st.Raw())
				}
			}()
		}
	}

	var srv *proc
	var got countWriter
	if !audio {
		srv, err = start(ctx, topo.Dst, "", &got, "socat", "-u",
			fmt.Sprintf("OPENSSL-LISTEN:%d,bind=%s,cert=%s,verify=0", port, path.DstAddr, filepath.Join(dir, "server.pem")), "STDOUT")
		if err != nil {
			return fail(err)
		}
		defer srv.kill()
	}
	if hogs > 0 {
		h, err := start(ctx, topo.Src, "", nil, append(lanesRun, "stress-ng", "--cpu", strconv.Itoa(hogs), "--cpu-method", "int64", "--timeout", "900s", "--quiet")...)
		if err != nil {
			return fail(err)
		}
		defer h.kill()
	}
	if srv != nil {
		// A client that connects before the server listens is refused
		// and exits; the server would then wait out the whole limit.
		if err := waitListen(ctx, topo.Dst, port, 30*time.Second); err != nil {
			return fail(fmt.Errorf("TLS server: %w: %s", err, tail(srv.stderr.String(), 300)))
		}
	}
	time.Sleep(time.Second) // the hogs running
	if hogs > 0 {
		// On the slowed CPU stress-ng takes seconds to fork its
		// workers (30: 3–5 s); all of them start before the boost is
		// loaded.
		if err := waitProcs(ctx, c, "sync", "stress-ng", hogs+1, 60*time.Second); err != nil {
			return fail(fmt.Errorf("hogs: %w", err))
		}
	}
	if a.Boost != "" {
		cfg += "\n[lanes.sync.boost]\n" + a.Boost
		if err := os.WriteFile(filepath.Join(rdir, "lanes.toml"), []byte(cfg), 0o644); err != nil {
			return fail(err)
		}
		if _, err := c.Reload(ctx); err != nil {
			return fail(fmt.Errorf("lanesd: load the boost policy: %w", err))
		}
	}

	// The oracle: lanesd hears of every transition of the emulator's
	// schedule (the same seed, so the same intervals).
	// (Without a boost policy nobody listens: lanesd refuses contacts.)
	// The sender starts once lanesd knows the link's state: a sender
	// started while the link is up starts in a contact.
	octx, stopOracle := context.WithCancel(ctx)
	contacts := make(chan int, 1)
	if a.Boost != "" {
		ready, up := make(chan struct{}), make(chan struct{})
		go func() {
			contacts <- oracle(octx, c, linkem.NewExpSchedule(opts.MeanOn, opts.MeanOff, seed), t0, ready, up)
		}()
		wait := ready
		if opts.StartUp && !audio {
			wait = up
		}
		select {
		case <-wait:
		case <-ctx.Done():
		}
	} else {
		contacts <- 0
		if opts.StartUp && !audio {
			sched := linkem.NewExpSchedule(opts.MeanOn, opts.MeanOff, seed)
			if at := time.Since(t0); sched.NextUp(at) != at {
				sleepUntil(ctx, t0.Add(sched.NextUp(at)))
			}
		}
	}

	if audio {
		run.JitterUS, run.Error = audioRun(ctx, opts, topo, lanesRun, cross)
		stopOracle()
		run.Contacts = <-contacts
		return run
	}
	begin := time.Now()
	cl, err := start(ctx, topo.Src, "", nil, append(lanesRun, "socat", "-u", "FILE:"+filepath.Join(dir, "payload"),
		fmt.Sprintf("OPENSSL:%s:%d,verify=0", path.DstAddr, port))...)
	if err != nil {
		stopOracle()
		return fail(err)
	}
	defer cl.kill()
	boosts.line(fmt.Appendf(nil, `{"time":%q,"sender_pid":%d}`, begin.Format(time.RFC3339Nano), cl.cmd.Process.Pid))
	limit := time.Duration(float64(opts.Size)*8/float64(opts.Rate)*float64(time.Second))*6 + 60*time.Second
	timeout := time.After(limit)
	clDone := cl.done
	for waiting := true; waiting; {
		waiting = false
		select {
		case <-clDone:
			// The client has sent everything (the server finishes in a
			// moment) or has failed (the server would wait to the limit).
			if cl.err != nil {
				run.Error = fmt.Sprintf("TLS client: %v after %.1f s (the server had %d bytes): %s",
					cl.err, time.Since(begin).Seconds(), got.count(), tail(cl.stderr.String(), 300))
				break
			}
			clDone, waiting = nil, true
		case <-srv.done:
			end := time.Now()
			run.Secs = end.Sub(begin).Seconds()
			// The same schedule again (the same seed): how long of the
			// transfer the link was up.
			sched := linkem.NewExpSchedule(opts.MeanOn, opts.MeanOff, seed)
			run.UpSecs = UpTime(sched, begin.Sub(t0), end.Sub(t0)).Seconds()
			if !got.first.IsZero() { // the server has exited: its output copied
				run.FirstByteSecs = got.first.Sub(begin).Seconds()
				run.UpAfterFirstSecs = UpTime(sched, got.first.Sub(t0), end.Sub(t0)).Seconds()
			}
			run.Bytes = got.count()
			if srv.err != nil {
				run.Error = fmt.Sprintf("TLS server: %v: %s", srv.err, tail(srv.stderr.String(), 300))
			} else if got.count() != opts.Size {
				run.Error = fmt.Sprintf("the TLS server received %d bytes of %d: %s", got.count(), opts.Size, tail(srv.stderr.String(), 300))
			}
		case <-timeout:
			st := em.Stats()
			run.Error = fmt.Sprintf("transfer not done after %v (the server had %d bytes; the client %s; link %s; %s)",
				limit, got.count(), procState(cl), st.Up, st.Down)
		case <-ctx.Done():
			run.Error = ctx.Err().Error()
		}
	}
	stopOracle()
	run.Contacts = <-contacts
	return run
}

// lockedBuffer collects lines from one goroutine for another.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) line(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(append(l.b, b...), '\n')
}

func (l *lockedBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.b)
}

// waitProcs waits until lane has at least n processes whose name begins
// with prefix.
func waitProcs(ctx context.Context, c *client.Client, lane, prefix string, n int, limit time.Duration) error {
	got := 0
	for deadline := time.Now().Add(limit); ; {
		r, err := c.Procs(ctx)
		if err != nil {
			return err
		}
		got = 0
		for _, p := range r.Procs {
			if p.Lane == lane && strings.HasPrefix(p.Comm, prefix) {
				got++
			}
		}
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(100*time.Millisecond)) {
			return fmt.Errorf("%d of %d %s processes in lane %s after %v", got, n, prefix, lane, limit)
		}
	}
}

// oracle reports each up and down transition of sched (time from t0) to
// lanesd until ctx ends, and returns how many contacts began. It closes
// ready once lanesd knows the link's state now (a contact begun if the
// link is up, none if it is down), and up once lanesd has the first
// contact.
func oracle(ctx context.Context, c *client.Client, sched *linkem.ExpSchedule, t0 time.Time, ready, up chan<- struct{}) int {
	n := 0
	at := time.Since(t0)
	if end := sched.NextUp(at); end != at { // down now: the first contact begins at its end
		close(ready)
		ready = nil
		if !sleepUntil(ctx, t0.Add(end)) {
			return n
		}
		at = end
	}
	if _, err := c.Contact(ctx, true, nil); err == nil {
		n++
	}
	if ready != nil {
		close(ready)
	}
	close(up)
	for ctx.Err() == nil {
		// The next down period: NextUp of a time inside it is its end.
		end := sched.NextUp(at)
		if end == at { // up now: find when it goes down
			var down linkem.Interval
			for _, iv := range sched.DownIntervals() {
				if iv.Start >= at {
					down = iv
					break
				}
			}
			if down.End == 0 {
				sched.NextUp(at + time.Second) // generate further
				at += time.Second
				continue
			}
			if !sleepUntil(ctx, t0.Add(down.Start)) {
				break
			}
			c.Contact(ctx, false, nil)
			if !sleepUntil(ctx, t0.Add(down.End)) {
				break
			}
			if _, err := c.Contact(ctx, true, nil); err == nil {
				n++
			}
			at = down.End
			continue
		}
		at = end
	}
	return n
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

// hostLine names the kernel and the CPUs the figures come from.
func hostLine() string {
	return fmt.Sprintf("Linux %s, %d CPUs", features.KernelRelease(), cpu.OnlineCPUs())
}

const (
	audioBytes    = 80
	audioInterval = 20 * time.Millisecond
	crossPort     = 5501
	audioPort     = 5502
)

// audioRun runs the audio sender in the lane for opts.AudioDuration
// beside iperf3 UDP cross traffic at cross percent of the link, and
// returns its send jitter in microseconds.
func audioRun(ctx context.Context, opts Options, topo *netns.Topology, lanesRun []string, cross int) (float64, string) {
	path := topo.Paths[0]
	if cross > 0 {
		srv, err := start(ctx, topo.Dst, "", nil, "iperf3", "-s", "-1", "-p", strconv.Itoa(crossPort))
		if err != nil {
			return 0, err.Error()
		}
		defer srv.kill()
		time.Sleep(200 * time.Millisecond)
		bps := opts.Rate * uint64(cross) / 100
		cl, err := start(ctx, topo.Src, "", nil, "iperf3", "-c", path.DstAddr.String(), "-p", strconv.Itoa(crossPort), "-u", "-b", strconv.FormatUint(bps, 10),
			"-t", strconv.Itoa(int(opts.AudioDuration/time.Second)+5))
		if err != nil {
			return 0, err.Error()
		}
		defer cl.kill()
		time.Sleep(time.Second)
	}
	cfg, _ := json.Marshal(AudioConfig{To: fmt.Sprintf("%s:%d", path.DstAddr, audioPort), Duration: opts.AudioDuration, Interval: audioInterval, Bytes: audioBytes})
	var out bytes.Buffer
	p, err := start(ctx, topo.Src, "", &out, append(lanesRun, opts.LanesBin, "bench", "hotspotaudio", string(cfg))...)
	if err != nil {
		return 0, err.Error()
	}
	select {
	case <-p.done:
	case <-time.After(opts.AudioDuration + 30*time.Second):
		p.kill()
		return 0, "audio sender did not end"
	case <-ctx.Done():
		p.kill()
		return 0, ctx.Err().Error()
	}
	if p.err != nil {
		return 0, fmt.Sprintf("audio sender: %v: %s", p.err, tail(p.stderr.String(), 300))
	}
	var r AudioResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return 0, fmt.Sprintf("audio sender output %q: %v", tail(out.String(), 200), err)
	}
	return float64(r.Jitter) / float64(time.Microsecond), ""
}

func ptr[T any](v T) *T { return &v }

// countWriter counts what the TLS server wrote out (what it received),
// and when its first byte came.
// countWriter counts what is written to it and when the first byte
// came. first is read once the writer is done; the count at any time.
type countWriter struct {
	n     atomic.Int64
	first time.Time
}

func (w *countWriter) Write(b []byte) (int, error) {
	if w.n.Load() == 0 && len(b) > 0 {
		w.first = time.Now()
	}
	w.n.Add(int64(len(b)))
	return len(b), nil
}

func (w *countWriter) count() int64 { return w.n.Load() }

// procState says whether p is still running or how it ended.
func procState(p *proc) string {
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Sprintf("exited: %v: %s", p.err, tail(p.stderr.String(), 300))
		}
		return "exited 0"
	default:
		return "still running"
	}
}

// waitListen waits until a TCP socket listens on port in namespace ns.
func waitListen(ctx context.Context, ns string, port int, limit time.Duration) error {
	for deadline := time.Now().Add(limit); ; {
		out, err := netns.Command(ctx, ns, "ss", "-Hltn", fmt.Sprintf("sport = :%d", port)).Output()
		if err != nil {
			return fmt.Errorf("ss in %s: %w", ns, err)
		}
		if len(bytes.TrimSpace(out)) > 0 {
			return nil
		}
		if time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return fmt.Errorf("nothing listening on port %d in %s after %v", port, ns, limit)
		}
	}
}

// slowCPU slows CPU n down for everything but itself: a SCHED_FIFO
// thread pinned to it spins for all but pct percent of every millisecond
// and sleeps the rest (to absolute times, so that the gaps do not drift).
// stop ends it and waits for the thread to go.
func slowCPU(n int, pct float64) (stop func(), err error) {
	busy := time.Duration(float64(time.Millisecond) * (100 - pct) / 100)
	started, done := make(chan struct{}), make(chan error, 1)
	var quit atomic.Bool
	go func() {
		done <- rtthread.Run(50, func(sleepUntil func(time.Time)) error {
			var set unix.CPUSet
			set.Set(n)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				return fmt.Errorf("pin to CPU %d: %w", n, err)
			}
			close(started)
			for next := time.Now(); !quit.Load(); {
				for time.Since(next) < busy {
				}
				next = next.Add(time.Millisecond)
				sleepUntil(next)
			}
			return nil
		})
	}()
	select {
	case <-started:
		return func() { quit.Store(true); <-done }, nil
	case err := <-done:
		return nil, err
	}
}

// capPeriod is the period the lane's cap is enforced in.
func capPeriod(o Options) time.Duration {
	if o.CapPeriod > 0 {
		return o.CapPeriod
	}
	return cpu.Period
}

package coord

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/pacer"
	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/netns"
)

// Payload is a packet's size.
const Payload = 1200

const port = 5470

// warmup is how many periods a deadline producer runs before frame 0.
const warmup = 5

// producerPriority is a producer's SCHED_FIFO priority where the CPU
// half is real-time priority rather than a deadline: above the busy loops
// and this process's other threads, below the pacer.
const producerPriority = 10

// pacerPriority is the pacer's SCHED_FIFO priority: above the busy loops
// and the producers' ordinary threads (a deadline thread still runs
// first).
const pacerPriority = 50

// Experiment runs the arms and returns their outcomes. Needs root.
func Experiment(ctx context.Context, o Options) (Result, error) {
	switch {
	case o.Hogs == 0:
		o.Hogs = 2 * cpu.OnlineCPUs()
	case o.Hogs < 0:
		o.Hogs = 0 // none
	}
	if len(o.Arms) == 0 {
		o.Arms = Arms
	}
	if err := o.Check(); err != nil {
		return Result{}, fmt.Errorf("coord: %w", err)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	progress := func(f string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "coord: "+f+"\n", a...)
		}
	}
	if o.CPU == "auto" {
		o.CPU = "fifo"
		if m, err := cpu.ReserveMechanism("auto", "auto"); err == nil && m.Preferred {
			o.CPU = "deadline"
		}
	}
	rel := features.KernelRelease()
	res := Result{Host: fmt.Sprintf("Linux %s, %d CPUs", rel, cpu.OnlineCPUs()), Options: o, MinUtil: o.config(true).MinUtilization()}
	// Producers, the pacer and the receiver each hold a thread and want a
	// P at once when a period starts.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(8, runtime.GOMAXPROCS(0))))
	// No garbage collection while the arms run: its stop-the-world waits
	// for every thread, the ordinary ones among the busy loops too, and
	// would stall the deadline producers and the real-time pacer behind
	// them (the experiment allocates a few MB, up front).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// Every thread of this process runs above the busy loops
	// (SCHED_FIFO 1; the threads Go starts later inherit it) but the
	// ordinary producers, which set themselves back. The Go runtime's
	// threads share its locks: one preempted by a busy loop while it
	// holds one stalls every thread that wants it, deadline producers and
	// the pacer included, for as long as the busy loops keep it off the
	// CPU — all producers lost the same period at once before this.
	restore, err := realtimeProcess()
	if err != nil {
		return res, err
	}
	defer restore()
	rounds, err := calibrate(o.Work)
	if err != nil {
		return res, err
	}
	o.Logf("%d rounds of SHA-256 over %d bytes cost %v", rounds, Payload, o.Work)
	d, err := netns.NewDirect(o.Logf)
	if err != nil {
		return res, fmt.Errorf("coord: %w", err)
	}
	defer d.Close()
	for id, name := range o.Arms {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		progress("arm %s (%d/%d): %d frames of %v", name, id+1, len(o.Arms), o.Frames, o.Period)
		a, err := runArm(ctx, o, d, byte(id+1), name, rounds)
		if err != nil {
			return res, fmt.Errorf("coord: arm %s: %w", name, err)
		}
		progress("arm %s: %d of %d frames missed, %d windows violated, start max %v (l_max %v)", name, a.Missed, a.Frames, a.Violations, a.StartMax, a.LMax)
		res.Arms = append(res.Arms, a)
	}
	return res, nil
}

// calibrate finds how many hashing rounds cost work on this CPU.
func calibrate(work time.Duration) (int, error) {
	var buf [Payload]byte
	n, t0 := 0, time.Now()
	for time.Since(t0) < 100*time.Millisecond {
		for range 100 {
			hash(buf[:])
		}
		n += 100
	}
	per := time.Since(t0) / time.Duration(n)
	if per <= 0 {
		return 0, errors.New("coord: calibration measured no time")
	}
	return max(1, int(work/per)), nil
}

func hash(b []byte) {
	sum := sha256.Sum256(b)
	copy(b[16:], sum[:])
}

// arrival is one packet at the receiver.
type arrival struct {
	stream int
	frame  int64
	at     time.Time // kernel receive timestamp
}

func runArm(ctx context.Context, o Options, d *netns.Direct, id byte, name string, rounds int) (Arm, error) {
	useDeadline, usePhase, _ := armParts(name)
	cfg := o.config(usePhase)
	p, err := pacer.New(cfg)
	if err != nil {
		return Arm{}, err
	}
	a := Arm{Name: name, Deadline: useDeadline, Phase: cfg.Streams[0].Phase, LMax: cfg.Streams[0].LMax()}
	due := o.Period
	if usePhase {
		due = o.Phase
	}
	fifo := useDeadline && o.CPU == "fifo"
	switch {
	case fifo:
		a.CPU = fmt.Sprintf("SCHED_FIFO %d", producerPriority)
	case useDeadline:
		a.CPU = fmt.Sprintf("SCHED_DEADLINE due %v", due)
	}

	// The receiver, in the far namespace, with kernel timestamps.
	var rc *net.UDPConn
	if err := netns.Do(d.Dst, func() error {
		var err error
		rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: d.DstAddr.AsSlice(), Port: port})
		return err
	}); err != nil {
		return a, fmt.Errorf("receiver: %w", err)
	}
	defer rc.Close()
	raw, err := rc.SyscallConn()
	if err != nil {
		return a, err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) }); err != nil || serr != nil {
		return a, fmt.Errorf("receiver: SO_TIMESTAMPNS: %v %v", err, serr)
	}
	// A buffer for every packet of the arm, past net.core.rmem_max
	// (root): a receiver that falls behind (an emulated CPU) drops none.
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, o.Streams*o.Frames*o.Packets*4096)
	}); err != nil || serr != nil {
		return a, fmt.Errorf("receiver: SO_RCVBUFFORCE: %v %v", err, serr)
	}
	arrivals := make([]arrival, 0, o.Streams*o.Frames*o.Packets)
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		buf := make([]byte, 2048)
		oob := make([]byte, 128)
		for {
			n, oobn, _, _, err := rc.ReadMsgUDP(buf, oob)
			if err != nil {
				return
			}
			if n < 10 || buf[0] != id {
				continue // another arm's straggler
			}
			at := time.Now()
			if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, m := range msgs {
					if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
						sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
						nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
						at = time.Unix(sec, nsec)
					}
				}
			}
			arrivals = append(arrivals, arrival{stream: int(buf[1]), frame: int64(binary.BigEndian.Uint64(buf[2:10])), at: at})
		}
	}()

	// The sender, in the near namespace.
	var sc *net.UDPConn
	if err := netns.Do(d.Src, func() error {
		var err error
		sc, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: d.DstAddr.AsSlice(), Port: port})
		return err
	}); err != nil {
		return a, fmt.Errorf("sender: %w", err)
	}
	defer sc.Close()

	// The last frame's packet period ends at Θ + Frames·T.
	slots := int64(o.Frames)*int64(o.Period/o.Slot) + int64(cfg.Streams[0].Phase/o.Slot)
	length := time.Duration(slots)*o.Slot + time.Second

	// Busy loops on every CPU: bash spinning until its own SECONDS run
	// out (no process per turn), killed at the arm's end and, should this
	// process die first, by the kernel (Pdeathsig). Ordinary threads: see
	// startHogs.
	hogs, stopHogs, err := startHogs(o.Hogs, int(length.Seconds())+5)
	if err != nil {
		return a, err
	}
	defer stopHogs()
	time.Sleep(200 * time.Millisecond)

	// The producers get their policies a period or more before slot 0.
	start := time.Now().Add(100*time.Millisecond + (warmup+2)*o.Period)
	ctx, cancel := context.WithTimeout(ctx, length+5*time.Second)
	defer cancel()
	type runOut struct {
		rs  pacer.RunStats
		err error
	}
	ran := make(chan runOut, 1)
	go func() {
		rs, err := p.Run(ctx, pacer.RunOptions{Start: start, End: slots, Priority: pacerPriority, Send: func(_ int, b []byte) error {
			_, err := sc.Write(b)
			return err
		}})
		ran <- runOut{rs, err}
	}()

	// The producers: one thread each, a frame's CPU work every period.
	ready := make([][]time.Duration, o.Streams)
	refused := make([]string, o.Streams)
	skipped := make([]int, o.Streams)
	var wg sync.WaitGroup
	for i := range o.Streams {
		wg.Go(func() {
			runtime.LockOSThread() // the thread ends with the goroutine
			buf := make([]byte, Payload)
			// Every packet is allocated before the first period: the
			// producers allocate nothing while they run.
			pks := make([]byte, o.Frames*o.Packets*Payload)
			// Touched now: a page fault in a job is runtime spent.
			for j := 0; j < len(pks); j += 4096 {
				pks[j] = 1
			}
			for range rounds { // and the hashing's code paged in
				hash(buf)
			}
			ready[i] = make([]time.Duration, 0, o.Frames)
			sleepUntil := func(at time.Time) {
				if wait := time.Until(at); wait > 0 {
					ts := unix.NsecToTimespec(int64(wait))
					for unix.Nanosleep(&ts, &ts) == unix.EINTR {
					}
				}
			}
			// A periodic deadline task. It gets its policy at once, a
			// period or more before frame 0's release (an ordinary thread
			// among the busy loops may wake many milliseconds late), and
			// sleeps to that release: waking after its first deadline and
			// period, it starts a new period then, and the kernel's
			// periods line up with the frames'. After each job
			// sched_yield gives up what is left of its runtime until the
			// kernel's next period. (Sleeping to each release instead
			// wakes it up to a tick before the kernel's period, and the
			// kernel holds a constrained-deadline task to its next
			// period: a whole period late.)
			deadline := false
			switch {
			case fifo:
				attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: producerPriority}
				if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
					refused[i] = err.Error()
				}
			case !useDeadline:
				// An ordinary thread, as a producer is unless lanes
				// schedules it.
				cpu.SetThreadSched(unix.Gettid(), cpu.ThreadSched{})
			}
			if useDeadline && !fifo {
				// The runtime is the frame's worst case, not its
				// calibrated cost: a job that runs out of runtime waits
				// for the next period.
				budget := min(3*o.Work, due)
				tid := unix.Gettid()
				if err := cpu.SetThreadDeadlineDue(tid, budget, due, o.Period); err != nil {
					refused[i] = err.Error()
				} else {
					deadline = true
					defer cpu.SetThreadSched(tid, cpu.ThreadSched{})
				}
			}
			if late := o.Period - time.Until(start.Add(-warmup*o.Period)); deadline && late > 0 {
				o.Logf("stream %d: the producer got its policy %v late (less than a period before its first job)", i, late.Round(time.Microsecond))
			}
			// A deadline producer runs warm-up jobs (not sent) for the
			// periods before frame 0, as a producer that was running
			// already would have: its first periods after getting the
			// policy are not yet the kernel's steady grid.
			first := 0
			if deadline {
				first = -warmup
			}
			sleepUntil(start.Add(time.Duration(first) * o.Period))
			for k := first; k < o.Frames; k++ {
				if deadline && k > first {
					unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
					// A job that ran out of runtime finished a period
					// late: the frame is the one of the period the kernel
					// started now, those between never made.
					since := time.Since(start.Add(time.Duration(first) * o.Period))
					if now := first + int((since+o.Period/4)/o.Period); now > k {
						if k >= 0 {
							o.Logf("stream %d: frame %d's period began %v after its release: frames %d-%d never made", i, k, (since - time.Duration(k-first)*o.Period).Round(time.Microsecond), k, now-1)
							skipped[i] += min(now, o.Frames) - k
						} else if now > 0 {
							skipped[i] += min(now, o.Frames)
						}
						k = now
						if k >= o.Frames {
							return
						}
					}
				}
				release := start.Add(time.Duration(k) * o.Period)
				if !deadline {
					sleepUntil(release)
				}
				if ctx.Err() != nil {
					// The run's time is up: this frame and the rest
					// were never made.
					skipped[i] += o.Frames - max(k, 0)
					return
				}
				for range rounds {
					hash(buf)
				}
				if k < 0 {
					continue // a warm-up job
				}
				ready[i] = append(ready[i], time.Since(release))
				for j := range o.Packets {
					pk := pks[(k*o.Packets+j)*Payload : (k*o.Packets+j+1)*Payload]
					pk[0], pk[1] = id, byte(i)
					binary.BigEndian.PutUint64(pk[2:10], uint64(k))
					copy(pk[10:], buf[10:])
					p.Enqueue(i, int64(k), pk)
				}
			}
		})
	}
	wg.Wait()
	// The busy loops ran through the arm: one that ended early (killed
	// with the thread that forked it, say) leaves the CPUs to the
	// producers.
	for _, h := range hogs {
		if st, err := procfs.ReadStat(h.Process.Pid); err != nil || st.State == 'Z' || st.State == 'X' {
			<-ran
			return a, fmt.Errorf("busy loop %d ended before the producers did (state %q, %v): killed early, or the arm ran 5 s past its %v", h.Process.Pid, st.State, err, length)
		}
	}
	out := <-ran
	if out.err != nil {
		return a, fmt.Errorf("pacer: %w", out.err)
	}
	time.Sleep(100 * time.Millisecond)
	rc.Close()
	<-recvDone

	for _, n := range skipped {
		a.Skipped += int64(n)
	}
	for _, r := range refused {
		if r != "" {
			a.DeadlineRefused = r
		}
	}
	a.PacerLate, a.PacerMaxLag = out.rs.Late, out.rs.MaxLate
	if out.rs.SendErrors > 0 {
		o.Logf("arm %s: %d sends failed, the first: %s", name, out.rs.SendErrors, out.rs.FirstError)
	}
	for _, st := range p.Stats() {
		a.Frames += st.Frames
		a.Missed += st.Missed
		a.Windows += st.Windows
		a.Violations += st.WindowViolations
		a.MaxMissRun = max(a.MaxMissRun, st.MaxMissRun)
		a.Sent += st.Sent
		a.Dropped += st.Dropped
		a.Late += st.Late
		a.StartMax = max(a.StartMax, st.MaxStart)
	}
	var rd []time.Duration
	for _, r := range ready {
		rd = append(rd, r...)
	}
	pr := linkem.PercentilesOf(rd)
	a.ReadyP99, a.ReadyMax = pr.P99, pr.Max
	var arr []time.Duration
	for _, r := range arrivals {
		arr = append(arr, r.at.Sub(start.Add(time.Duration(r.frame)*o.Period)))
	}
	a.Received = int64(len(arrivals))
	pa := linkem.PercentilesOf(arr)
	a.ArriveP99, a.ArriveMax = pa.P99, pa.Max
	return a, nil
}

// startHogs starts n busy loops that end by themselves after secs
// seconds, as ordinary (SCHED_OTHER) processes, and returns them and what
// kills them. A child starts with the policy of the thread that forked
// it, and every thread of this process runs at SCHED_FIFO 1 while the
// arms run (realtimeProcess): busy loops forked from one would spin above
// every ordinary thread and beside this process's own SCHED_FIFO 1
// threads, which the kernel then never runs until the loops end (the
// runtime's threads among them: the producers and the pacer stalled for
// seconds). So they are forked from a thread of their own under
// SCHED_OTHER, and each one's policy is checked. That thread waits for
// stop: a loop's Pdeathsig fires when the thread that forked it ends, and
// a thread back in Go's pool may be locked by a producer and end with it.
func startHogs(n, secs int) ([]*exec.Cmd, func(), error) {
	type out struct {
		hogs []*exec.Cmd
		err  error
	}
	started := make(chan out, 1)
	quit, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		// Never unlocked: the thread ends with the goroutine.
		runtime.LockOSThread()
		var hogs []*exec.Cmd
		defer func() {
			for _, h := range hogs {
				unix.Kill(-h.Process.Pid, unix.SIGKILL)
				h.Wait()
			}
		}()
		if err := cpu.SetThreadSched(unix.Gettid(), cpu.ThreadSched{}); err != nil {
			started <- out{err: fmt.Errorf("busy loops: an ordinary thread to start them from: %w", err)}
			return
		}
		for range n {
			h := exec.Command("bash", "-c", "while [ $SECONDS -lt "+strconv.Itoa(secs)+" ]; do :; done")
			h.SysProcAttr = &unix.SysProcAttr{Setpgid: true, Pdeathsig: unix.SIGKILL}
			if err := h.Start(); err != nil {
				started <- out{err: fmt.Errorf("busy loop: %w", err)}
				return
			}
			hogs = append(hogs, h)
			if s, err := cpu.GetThreadSched(h.Process.Pid); err != nil || s.Policy != unix.SCHED_NORMAL {
				started <- out{err: fmt.Errorf("busy loop %d: policy %d (%v), want SCHED_OTHER", h.Process.Pid, s.Policy, err)}
				return
			}
		}
		started <- out{hogs: hogs} // not appended to after this
		<-quit
	}()
	o := <-started
	if o.err != nil {
		<-stopped
		return nil, nil, o.err
	}
	return o.hogs, func() { close(quit); <-stopped }, nil
}

// realtimeProcess puts every thread of this process under SCHED_FIFO 1
// and returns what gives each its own policy back.
func realtimeProcess() (restore func(), err error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("coord: list this process's threads: %w", err)
	}
	own := map[int]cpu.ThreadSched{}
	restore = func() {
		for tid, s := range own {
			cpu.SetThreadSched(tid, s)
		}
		// Threads Go started meanwhile inherited SCHED_FIFO 1: ordinary.
		ents, _ := os.ReadDir("/proc/self/task")
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if _, known := own[tid]; err != nil || known {
				continue
			}
			if s, err := cpu.GetThreadSched(tid); err == nil && s.Policy == unix.SCHED_FIFO {
				cpu.SetThreadSched(tid, cpu.ThreadSched{})
			}
		}
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, err := cpu.GetThreadSched(tid)
		if err != nil {
			continue // ended
		}
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
			restore()
			return nil, fmt.Errorf("coord: SCHED_FIFO on thread %d: %w", tid, err)
		}
		own[tid] = s
	}
	return restore, nil
}

package linkem

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Options configure an emulator.
type Options struct {
	// Up is the direction from the first device to the second (src→dst),
	// Down the reverse.
	Up, Down Config
	// Realtime runs the emulator's threads with SCHED_FIFO priority 50 so
	// that other load on the host delays packets less. It needs
	// CAP_SYS_NICE; without it the emulator runs at normal priority and
	// says so through Logf. Because a thread returning from a system call
	// needs a free Go P before it can go on, Realtime also raises
	// GOMAXPROCS by the emulator's four threads.
	Realtime bool
	Logf     func(format string, args ...any)
}

// Emulator moves packets between two TUN devices through the emulated
// link, one reader and one writer thread per direction.
type Emulator struct {
	start time.Time
	dirs  [2]*direction
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	realtime bool
	// origin is when the links' traces and schedules start, on the
	// emulator's time (Restart); each direction's reader applies it to
	// its model before the next arrival.
	origin atomic.Int64
}

// latencySamples bounds the lateness samples kept per direction.
const latencySamples = 1 << 20

type pkt struct {
	buf []byte
	due time.Duration
}

type direction struct {
	name  string
	model *Model
	in    int // fd read
	out   int // fd written
	e     *Emulator

	mu      sync.Mutex
	q       []pkt
	qhead   int
	wake    chan struct{}
	stats   DirStats
	late    []time.Duration
	lateIdx int
	free    [][]byte // packet buffers, reused: no allocation once warm

	inPackets atomic.Uint64
	origin    time.Duration // the model's origin (the reader's own copy)
}

// Start starts an emulator between a (the src side: packets read from a
// go up, to b) and b. The devices are TUN devices opened without packet
// information; the emulator does not close them.
func Start(a, b *os.File, opts Options) (*Emulator, error) {
	for _, c := range []Config{opts.Up, opts.Down} {
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("start link emulator: %w", err)
		}
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	fa, fb, err := rawFDs(a, b)
	if err != nil {
		return nil, fmt.Errorf("start link emulator: %w", err)
	}
	e := &Emulator{start: time.Now(), stop: make(chan struct{}), realtime: opts.Realtime}
	mk := func(name string, cfg Config, in, out int) *direction {
		d := &direction{name: name, model: NewModel(cfg), in: in, out: out, e: e, wake: make(chan struct{}, 1)}
		d.stats.Dir = name
		d.late = make([]time.Duration, 0, 1<<16)
		d.stats.SettingRate = float64(cfg.Rate)
		if cfg.Trace != nil {
			d.stats.SettingRate = cfg.Trace.MeanRate()
		}
		return d
	}
	e.dirs[0] = mk("up", opts.Up, fa, fb)
	e.dirs[1] = mk("down", opts.Down, fb, fa)
	if opts.Realtime {
		// Each emulator thread must find a P free when its poll or sleep
		// returns, or it waits for the Go scheduler instead of the kernel.
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 4)
	}
	var rtWarn sync.Once
	for _, d := range e.dirs {
		for _, fn := range []func(){d.read, d.write} {
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				runtime.LockOSThread()
				// Not unlocked: a thread whose scheduling was changed
				// exits with its goroutine.
				if opts.Realtime {
					if err := setRealtime(); err != nil {
						rtWarn.Do(func() { logf("link emulator runs at normal priority: %v", err) })
					}
				}
				fn()
			}()
		}
	}
	return e, nil
}

// rawFDs returns the descriptors of the devices, in blocking mode: the
// emulator's threads poll and read them directly.
func rawFDs(a, b *os.File) (int, int, error) {
	var fds [2]int
	for i, f := range []*os.File{a, b} {
		fd := int(f.Fd()) // Fd puts the file in blocking mode
		if err := unix.SetNonblock(fd, false); err != nil {
			return 0, 0, fmt.Errorf("set %s blocking: %w", f.Name(), err)
		}
		fds[i] = fd
	}
	return fds[0], fds[1], nil
}

func setRealtime() error {
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set timer slack: %w", err)
	}
	attr := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 50}
	if err := unix.SchedSetAttr(0, attr, 0); err != nil {
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("set SCHED_FIFO: %w (needs CAP_SYS_NICE)", err)
		}
		return fmt.Errorf("set SCHED_FIFO: %w", err)
	}
	return nil
}

// Started returns the emulator's time origin: delivery times and
// schedules count from it.
func (e *Emulator) Started() time.Time { return e.start }

// now is the time since Start on the monotonic clock.
func (e *Emulator) now() time.Duration { return time.Since(e.start) }

func (e *Emulator) stopped() bool {
	select {
	case <-e.stop:
		return true
	default:
		return false
	}
}

// read takes packets from the device, runs them through the model and
// queues the accepted ones for the writer.
func (d *direction) read() {
	pfd := []unix.PollFd{{Fd: int32(d.in), Events: unix.POLLIN}}
	for !d.e.stopped() {
		n, err := unix.Poll(pfd, 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n == 0 || pfd[0].Revents&unix.POLLIN == 0 {
			if pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
				return
			}
			continue
		}
		buf := d.getBuf()
		m, err := unix.Read(d.in, buf)
		if err != nil || m <= 0 {
			d.putBuf(buf)
			if err != nil && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
				return
			}
			continue
		}
		now := d.e.now()
		if o := time.Duration(d.e.origin.Load()); o != d.origin {
			d.origin = o
			d.model.SetOrigin(o)
		}
		v, due := d.model.Arrive(now, m)
		d.mu.Lock()
		d.stats.PacketsIn++
		d.stats.BytesIn += uint64(m)
		switch v {
		case Lost:
			d.stats.Lost++
		case Dropped:
			d.stats.Dropped++
		case Accepted:
			d.q = append(d.q, pkt{buf: buf[:m], due: due})
		}
		d.stats.MaxQueue = d.model.MaxQueue()
		d.mu.Unlock()
		if v != Accepted {
			d.putBuf(buf)
			continue
		}
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

func (d *direction) getBuf() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := len(d.free); n > 0 {
		b := d.free[n-1]
		d.free = d.free[:n-1]
		return b[:cap(b)]
	}
	return make([]byte, 2048)
}

func (d *direction) putBuf(b []byte) {
	d.mu.Lock()
	d.free = append(d.free, b[:cap(b)])
	d.mu.Unlock()
}

// write delivers queued packets at their due times, sleeping on the
// monotonic clock in between.
func (d *direction) write() {
	for {
		d.mu.Lock()
		if d.qhead == len(d.q) {
			d.q, d.qhead = d.q[:0], 0
			d.mu.Unlock()
			select {
			case <-d.wake:
				continue
			case <-d.e.stop:
				return
			}
		}
		p := d.q[d.qhead]
		d.mu.Unlock()
		if !d.sleepUntil(p.due) {
			return
		}
		d.mu.Lock()
		d.q[d.qhead] = pkt{}
		d.qhead++
		d.mu.Unlock()
		now := d.e.now()
		_, err := unix.Write(d.out, p.buf)
		d.mu.Lock()
		if err == nil {
			d.stats.Delivered++
			d.stats.BytesDelivered += uint64(len(p.buf))
			if d.stats.Delivered == 1 {
				d.stats.FirstDelivery = now
			}
			d.stats.LastDelivery = now
			if b := int(now / SeriesStep); b < SeriesMax {
				for len(d.stats.Series) <= b {
					d.stats.Series = append(d.stats.Series, 0)
				}
				d.stats.Series[b] += uint64(len(p.buf))
			}
			late := now - p.due
			if len(d.late) < latencySamples {
				d.late = append(d.late, late)
			} else {
				d.late[d.lateIdx%latencySamples] = late
				d.lateIdx++
			}
		}
		d.mu.Unlock()
		d.putBuf(p.buf)
	}
}

// sleepUntil sleeps until due; it returns false if the emulator stopped.
func (d *direction) sleepUntil(due time.Duration) bool {
	for {
		if d.e.stopped() {
			return false
		}
		left := due - d.e.now()
		if left <= 0 {
			return true
		}
		// Wake at least every 100 ms to notice a stop.
		ts := unix.NsecToTimespec(int64(min(left, 100*time.Millisecond)))
		_ = unix.Nanosleep(&ts, nil)
	}
}

// Stats returns the current counters of both directions.
func (e *Emulator) Stats() Report {
	var r Report
	for i, d := range e.dirs {
		d.mu.Lock()
		s := d.stats
		s.Series = append([]uint64(nil), s.Series...)
		late := append([]time.Duration(nil), d.late...)
		d.mu.Unlock()
		s.Lateness = PercentilesOf(late)
		if i == 0 {
			r.Up = s
		} else {
			r.Down = s
		}
	}
	return r
}

// Restart makes both directions' traces and schedules start afresh now,
// to the SeriesStep below (so that Series buckets and the link's time
// line up), and returns that time, the emulator's: a phase that starts
// after a set-up of its own (a daemon, a warm-up) meets the link where a
// phase without one does. Packets queued keep their delivery times.
func (e *Emulator) Restart() time.Duration {
	o := e.now().Truncate(SeriesStep)
	e.origin.Store(int64(o))
	return o
}

// ResetLateness forgets the lateness samples collected so far, so that
// the next Stats describe only what follows.
func (e *Emulator) ResetLateness() {
	for _, d := range e.dirs {
		d.mu.Lock()
		d.late, d.lateIdx = d.late[:0], 0
		d.mu.Unlock()
	}
}

// Stop stops the emulator's threads (within about 100 ms) and returns the
// final report. Packets still queued are discarded.
func (e *Emulator) Stop() Report {
	e.once.Do(func() {
		close(e.stop)
		e.wg.Wait()
		if e.realtime {
			runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)-4))
		}
	})
	return e.Stats()
}

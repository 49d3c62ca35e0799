package procwatch

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/monitor"
)

// Record kinds of bpf/procwatch.c.
const (
	kindExec = 1
	kindExit = 2
	kindFork = 3
	kindWake = 4 // the program's timer woke the reader
)

// gather is how long the reader waits between readings of the ring while
// records keep coming.
const gather = time.Millisecond

// lostEvery is how often the count of records the ring buffer had no room
// for is read; a rise is published as proc.overflow.
const lostEvery = 250 * time.Millisecond

// nsPerTick converts the kernel's start_boottime (ns) to /proc/PID/stat's
// starttime (clock ticks).
const nsPerTick = uint64(time.Second) / procfs.UserHZ

// Ticks converts a start time in ns since boot into clock ticks.
func Ticks(ns uint64) uint64 { return ns / nsPerTick }

var loadProbe = features.Probe{Name: "process events (BPF)", Fn: probeLoad}

// Probe says whether this kernel runs bpf/procwatch.c: kernel BTF with the
// sched_process_exec and sched_process_exit tracepoints (tp_btf) and a
// verifier that loads the programs and their ring buffer. A conclusive
// "no" wraps errors.ErrUnsupported and names what is missing.
func Probe() error { return loadProbe.Result() }

func probeLoad() error {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return features.Missing("kernel BTF", "CONFIG_DEBUG_INFO_BTF (/sys/kernel/btf/vmlinux)", err)
	}
	for _, tp := range []string{"btf_trace_sched_process_exec", "btf_trace_sched_process_exit", "btf_trace_sched_process_fork"} {
		var td *btf.Typedef
		if err := spec.TypeByName(tp, &td); err != nil {
			return features.Missing("tracepoint "+tp[len("btf_trace_"):], "CONFIG_BPF_EVENTS", err)
		}
	}
	var objs lanesbpf.ProcwatchObjects
	if err := lanesbpf.LoadProcwatchObjects(&objs, nil); err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) {
			return features.Missing("BPF tp_btf programs with a ring buffer", ">= Linux 5.8", err)
		}
		return fmt.Errorf("load the process event programs: %w", err)
	}
	return objs.Close()
}

// Watch is the running source: its programs attached, its ring buffer
// read into the bus.
type Watch struct {
	objs  lanesbpf.ProcwatchObjects
	links []link.Link
	rd    *ringbuf.Reader
	// wake is the ring buffer map's descriptor (a duplicate) in Go's
	// network poller: the reader waits on it without a thread of its own
	// blocked in epoll_wait (rd never blocks), and a deadline set on it
	// wakes the reader from elsewhere (poke).
	wake       *os.File
	wakeClosed bool // by Close or publish's failure path only
	bus        *events.Bus
	logf       func(string, ...any)

	forks      atomic.Bool
	forkMu     sync.Mutex
	stopFollow func()

	lost      uint64 // last value of the kernel's lost counter seen
	noPolling bool   // loadOptions.noPolling
	closing   atomic.Bool
	closeOnce sync.Once
	quit      chan struct{}
	done      chan struct{} // closed when run has returned
	lostDone  chan struct{} // closed when watchLost has returned
	closeErr  error
	// Counters (Stats).
	execs, exits, forksRead, overflows atomic.Uint64
}

// Publish loads and attaches the programs and publishes on bus, from the
// ring buffer's reader, proc.exec and proc.exit of every process (their
// payloads: ExecOf, ExitStart), proc.overflow when records were lost (the
// buffer was full: rescan /proc), and proc.fork of new processes while a
// subscription's patterns match it (it follows the bus's subscriptions).
// Close detaches everything.
func Publish(bus *events.Bus, logf func(string, ...any)) (*Watch, error) {
	return publish(bus, logf, loadOptions{})
}

// loadOptions change the program for tests: the ring buffer's size in
// bytes (a power of two, at least a page) and the wake-up delay; zero
// keeps the program's. noPolling keeps the reader from reading on a
// timer of its own during a storm, so that it reads only when woken or
// poked, however busy the machine is with other processes.
type loadOptions struct {
	ringBytes uint32
	wakeDelay time.Duration
	noPolling bool
}

func publish(bus *events.Bus, logf func(string, ...any), o loadOptions) (*Watch, error) {
	if err := Probe(); err != nil {
		return nil, fmt.Errorf("process events (BPF): %w", err)
	}
	w := &Watch{bus: bus, logf: logf, noPolling: o.noPolling, quit: make(chan struct{}), done: make(chan struct{}), lostDone: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			w.detach()
		}
	}()
	spec, err := lanesbpf.LoadProcwatch()
	if err != nil {
		return nil, fmt.Errorf("process events (BPF): load: %w", err)
	}
	if o.ringBytes != 0 {
		spec.Maps[lanesbpf.ProcwatchMapEvents].MaxEntries = o.ringBytes
	}
	if o.wakeDelay != 0 {
		if err := spec.Variables[lanesbpf.ProcwatchVarWakeDelayNs].Set(uint64(o.wakeDelay)); err != nil {
			return nil, fmt.Errorf("process events (BPF): wake-up delay: %w", err)
		}
	}
	if err := spec.LoadAndAssign(&w.objs, nil); err != nil {
		return nil, fmt.Errorf("process events (BPF): load: %w", err)
	}
	// The ring buffer's reader first, then the programs: nothing posted
	// is missed.
	rd, err := ringbuf.NewReader(w.objs.Events)
	if err != nil {
		return nil, fmt.Errorf("process events (BPF): ring buffer: %w", err)
	}
	w.rd = rd
	w.rd.SetDeadline(time.Unix(1, 0)) // a read never blocks: wake is waited on instead
	fd, err := unix.Dup(w.objs.Events.FD())
	if err != nil {
		return nil, fmt.Errorf("process events (BPF): ring buffer: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("process events (BPF): ring buffer: %w", err)
	}
	w.wake = os.NewFile(uintptr(fd), "procwatch ring buffer")
	for _, p := range []*ebpf.Program{w.objs.ProcwatchExit, w.objs.ProcwatchNewproc, w.objs.ProcwatchExec} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return nil, fmt.Errorf("process events (BPF): attach %s: %w", p, err)
		}
		w.links = append(w.links, l)
	}
	ok = true
	go w.run()
	go w.watchLost()
	follow := func() {
		if err := w.SetForks(bus.Interested(monitor.TopicFork)); err != nil {
			logf("process events (BPF): %v", err)
		}
	}
	w.stopFollow = bus.OnChange(follow)
	follow()
	return w, nil
}

// ExeID says which file process pid, started at start (clock ticks),
// executed last, as the exec program saw it; ok is false when that is not
// known (the entry was evicted, or pid is another process now). Two
// processes with the same ExeID executed the same file by the same path,
// unless it or a directory above it was renamed in between.
func (w *Watch) ExeID(pid int, start uint64) (ExeID, bool) {
	if pid <= 0 {
		return ExeID{}, false
	}
	var id lanesbpf.ProcwatchExeId
	if err := w.objs.ExeIds.Lookup(uint32(pid), &id); err != nil || Ticks(id.StartNs) != start {
		return ExeID{}, false
	}
	return ExeID{Mount: id.Mnt, Dentry: id.Dentry, Inode: id.Ino}, true
}

// SetForks turns the publishing of new processes (proc.fork) on or off.
func (w *Watch) SetForks(on bool) error {
	w.forkMu.Lock()
	defer w.forkMu.Unlock()
	if w.forks.Load() == on {
		return nil
	}
	v := uint32(0)
	if on {
		v = 1
	}
	if err := w.objs.WantForks.Set(v); err != nil {
		return fmt.Errorf("publish forks %v: %w", on, err)
	}
	w.forks.Store(on)
	return nil
}

// Stats are the records read since the start, by kind, and the overflows
// published.
type Stats struct {
	Execs, Exits, Forks, Overflows uint64
}

// Stats returns the counters.
func (w *Watch) Stats() Stats {
	return Stats{Execs: w.execs.Load(), Exits: w.exits.Load(), Forks: w.forksRead.Load(), Overflows: w.overflows.Load()}
}

func (w *Watch) run() {
	defer close(w.done)
	rc, err := w.wake.SyscallConn()
	if err != nil {
		w.logf("process events (BPF): %v", err)
		return
	}
	var rec ringbuf.Record
	size := int(unsafe.Sizeof(lanesbpf.ProcwatchPwEvent{}))
	// drain reads what the ring holds; false when the reader must end.
	drain := func() (n int, ok bool) {
		for {
			err := w.rd.ReadInto(&rec)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return n, true // all read
			}
			if err != nil {
				if !w.closing.Load() && !errors.Is(err, ringbuf.ErrClosed) && !errors.Is(err, os.ErrClosed) {
					w.logf("process events (BPF): read: %v", err)
				}
				return n, false
			}
			if len(rec.RawSample) < size {
				continue
			}
			e := (*lanesbpf.ProcwatchPwEvent)(unsafe.Pointer(&rec.RawSample[0]))
			if e.Kind == kindWake {
				continue
			}
			n++
			if ev, ok := w.busEvent(e); ok {
				w.bus.Publish(ev)
			}
		}
	}
	polling := false
	setPolling := func(on bool) {
		if on == polling {
			return
		}
		v := uint32(0)
		if on {
			v = 1
		}
		if err := w.objs.Polling.Set(v); err == nil {
			polling = on
		}
	}
	for {
		n, ok := drain()
		if !ok || w.closing.Load() {
			return
		}
		if n > 0 && !w.noPolling {
			// Records keep coming: read again after gather, on a timer
			// of the reader's own, the program arming no wake-up.
			setPolling(true)
			time.Sleep(gather)
			continue
		}
		if polling {
			// Quiet again: the program arms its wake-up from now on;
			// what came before that is read first.
			setPolling(false)
			continue
		}
		// The program wakes the reader (its timer); an overflow pokes.
		err := rc.Read(func(uintptr) bool { return w.rd.AvailableBytes() > 0 || w.closing.Load() })
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.wake.SetReadDeadline(time.Time{})
			continue
		}
		if err != nil {
			if !w.closing.Load() {
				w.logf("process events (BPF): wait: %v", err)
			}
			return
		}
	}
}

// poke makes the reader read what the ring holds now, without the
// program's wake-up (which a full ring cannot post).
func (w *Watch) poke() { w.wake.SetReadDeadline(time.Unix(1, 0)) }

// busEvent turns a record into its bus event.
func (w *Watch) busEvent(e *lanesbpf.ProcwatchPwEvent) (events.Event, bool) {
	switch e.Kind {
	case kindExec:
		w.execs.Add(1)
		return events.Event{Source: Source, Topic: monitor.TopicExec, Payload: map[string]any{
			"pid":        int64(e.Pid),
			KeyStart:     Ticks(e.StartNs),
			KeyComm:      comm(e.Comm[:]),
			KeyUID:       int64(e.Uid),
			KeyCgroupV2:  e.CgV2,
			KeyCgroupCPU: e.CgCpu,
			KeyCgroupIO:  e.CgIo,
		}}, true
	case kindExit:
		w.exits.Add(1)
		return events.Event{Source: Source, Topic: monitor.TopicExit, Payload: map[string]any{
			"pid": int64(e.Pid), "ppid": int64(e.Ppid), KeyStart: Ticks(e.StartNs)}}, true
	case kindFork:
		w.forksRead.Add(1)
		if !w.forks.Load() {
			return events.Event{}, false
		}
		return events.Event{Source: Source, Topic: monitor.TopicFork, Payload: map[string]any{
			"pid": int64(e.Pid), "ppid": int64(e.Ppid)}}, true
	}
	return events.Event{}, false
}

// comm is the NUL-terminated command name.
func comm(b []int8) string {
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), n))
}

// watchLost publishes proc.overflow when the kernel's count of records
// that found the ring buffer full rises.
func (w *Watch) watchLost() {
	defer close(w.lostDone)
	t := time.NewTicker(lostEvery)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-t.C:
		}
		var n uint64
		if err := w.objs.Lost.Get(&n); err != nil {
			continue
		}
		if n != w.lost {
			w.logf("process events (BPF): %d records lost (the ring buffer was full)", n-w.lost)
			w.lost = n
			w.overflows.Add(1)
			w.bus.Publish(events.Event{Source: Source, Topic: monitor.TopicOverflow})
			w.poke()
		}
	}
}

// Close detaches the programs and ends the reader. It is safe to call
// more than once.
func (w *Watch) Close() error {
	w.closeOnce.Do(func() {
		if w.stopFollow != nil {
			w.stopFollow()
		}
		w.closing.Store(true)
		close(w.quit)
		// No more records; closing wake ends the reader's wait. The
		// reader and the lost counter's watcher end before the ring
		// buffer and the maps they read are closed under them.
		errs := []error{w.closeLinks(), w.closeWake()}
		<-w.done
		<-w.lostDone
		errs = append(errs, w.detach())
		if err := errors.Join(errs...); err != nil {
			w.closeErr = fmt.Errorf("process events (BPF): close: %w", err)
		}
	})
	return w.closeErr
}

func (w *Watch) closeLinks() error {
	var errs []error
	for _, l := range w.links {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	w.links = nil
	return errors.Join(errs...)
}

// closeWake closes the wake-up file once. The field itself stays: the
// reader and poke may still hold it, and a closed file only errs.
func (w *Watch) closeWake() error {
	if w.wake == nil || w.wakeClosed {
		return nil
	}
	w.wakeClosed = true
	return w.wake.Close()
}

// detach closes whatever of the links, the wake-up file, the reader and
// the objects is still open; no goroutine may be using them.
func (w *Watch) detach() error {
	errs := []error{w.closeLinks(), w.closeWake()}
	if w.rd != nil {
		errs = append(errs, w.rd.Close())
		w.rd = nil
	}
	errs = append(errs, w.objs.Close())
	return errors.Join(errs...)
}

// Mechanism is the `lanes doctor` line of this source while it runs.
func (w *Watch) Mechanism() features.Mechanism {
	return features.Mechanism{Resource: "process events", Backend: "BPF tracepoints (sched_process_exec, sched_process_exit) into a ring buffer",
		Preferred: true, OK: true, Reason: "an exec carries its start time, command, uid and cgroups: rules read no /proc file but an executable's path, once a second per file"}
}

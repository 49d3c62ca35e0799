package netsched

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/internal/netnsrun"
	"github.com/lanes-qos/lanes/internal/netprobe"
)

// Receive-side background (rLEDBAT, bpf/rledbat.c): the TCP sockets of a
// lane with net.cc = "ledbat" (laneFlagRecv) bound their own receive
// window from the delay they measure, so that a background download
// yields at a remote bottleneck without ingress shaping. The program is a
// BPF TCP iterator; recvRunner reads it every RecvPeriod, which runs it
// over the TCP sockets of the Enforcer's network namespace.

// RecvPeriod is how often the receive windows of background downloads are
// recomputed while some download runs. A run walks the kernel's whole TCP
// hash tables, empty buckets included (0.8 ms on a 24 GiB host with no
// sockets: docs/BENCHMARKS.md), so while no background socket receives the
// runner waits RecvIdlePeriod instead: a new background download runs
// unbounded for at most that long. And while no socket is in such a lane
// at all (none clamped either), the gates (socket storage iterators over
// the sockets lanes labelled) skip the run.
const (
	RecvPeriod     = 20 * time.Millisecond
	RecvIdlePeriod = 250 * time.Millisecond
	recvLinger     = 10 // runs without a receiving background socket before the runner slows
)

// recvRunner runs the rLEDBAT iterator every RecvPeriod until stopped.
type recvRunner struct {
	objs *lanesbpf.RledbatObjects
	it   *link.Iter
	// gates are the gate iterators (bpf/rledbat.c): a run of it is
	// skipped when they count no socket to act on. Empty: every run is
	// made (gateErr says why).
	gates   []*link.Iter
	gateErr error
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	err     error // the last run's error, nil once a run succeeds again
	// runs and skipped count the runs made and those the gates skipped.
	runs, skipped atomic.Uint64
}

// RecvStats are the receive-side counters: background sockets seen
// receiving (summed over runs), windows set, clamps lifted, and the
// iterator's runs made and skipped (no socket of a lane with rLEDBAT, none
// clamped).
type RecvStats struct {
	Sockets  uint64 `json:"sockets"`
	Clamped  uint64 `json:"clamped"`
	Released uint64 `json:"released"`
	Runs     uint64 `json:"runs"`
	Skipped  uint64 `json:"skipped"`
}

// startRecv loads and starts the receive-side runner once a lane asks for
// ledbat; a failure is remembered and logged once (downloads are then not
// bounded).
func (e *Enforcer) startRecv() {
	if e.recv != nil || e.recvErr != nil || e.objs == nil {
		return
	}
	r, err := e.newRecvRunner()
	if err != nil {
		e.recvErr = err
		e.logf("netsched: background downloads keep their receive windows (no rLEDBAT): %v", err)
		return
	}
	e.recv = r
	e.setLedbatTarget()
	e.logf("netsched: background downloads bound their receive windows (rLEDBAT), every %v while they run, %v otherwise", RecvPeriod, RecvIdlePeriod)
}

func (e *Enforcer) newRecvRunner() (*recvRunner, error) {
	if err := netprobe.HaveTCPIter(); err != nil {
		return nil, err
	}
	var objs lanesbpf.RledbatObjects
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{"lane_flags": e.objs.LaneFlags, "auto_label": e.objs.AutoLabel}}
	if err := lanesbpf.LoadRledbatObjects(&objs, opts); err != nil {
		return nil, fmt.Errorf("load the receive-window program (BPF TCP iterator with bpf_setsockopt): %w", err)
	}
	it, err := link.AttachIter(link.IterOptions{Program: objs.LanesRledbat})
	if err != nil {
		objs.Close()
		return nil, fmt.Errorf("attach the receive-window iterator: %w", err)
	}
	r := &recvRunner{objs: &objs, it: it, stop: make(chan struct{}), done: make(chan struct{})}
	for _, g := range []struct {
		prog *ebpf.Program
		m    *ebpf.Map
	}{{objs.LanesRledbatGateLabel, e.objs.AutoLabel}, {objs.LanesRledbatGateState, objs.RlState}} {
		gi, err := link.AttachIter(link.IterOptions{Program: g.prog, Map: g.m})
		if err != nil {
			r.gateErr = fmt.Errorf("attach the receive-window gate (BPF socket storage iterator): %w", err)
			break
		}
		r.gates = append(r.gates, gi)
	}
	if r.gateErr != nil {
		for _, gi := range r.gates {
			gi.Close()
		}
		r.gates = nil
		e.logf("netsched: the receive-window iterator runs whether or not a background socket exists: %v", r.gateErr)
	}
	// One run now: an error here means it cannot work at all.
	if err := e.runRecv(r); err != nil {
		for _, gi := range r.gates {
			gi.Close()
		}
		it.Close()
		objs.Close()
		return nil, err
	}
	go r.loop(e)
	return r, nil
}

// runRecv runs the iterator once, from a thread in the Enforcer's network
// namespace (the iterator walks the sockets of the namespace it is opened
// in).
func (e *Enforcer) runRecv(r *recvRunner) error {
	return netnsrun.In(e.ns, r.runOnce)
}

// runOnce runs the iterator over the sockets of the calling thread's
// network namespace.
func (r *recvRunner) runOnce() error {
	r.runs.Add(1)
	rd, err := r.it.Open()
	if err != nil {
		return fmt.Errorf("run the receive-window iterator: %w", err)
	}
	defer rd.Close()
	if _, err := io.Copy(io.Discard, rd); err != nil {
		return fmt.Errorf("run the receive-window iterator: %w", err)
	}
	return nil
}

// idle reports whether the gates count no socket the iterator would act
// on (false when there are no gates, or they cannot tell).
func (r *recvRunner) idle() bool {
	if len(r.gates) == 0 {
		return false
	}
	if err := r.objs.GateHits.Set(uint64(0)); err != nil {
		return false
	}
	for _, gi := range r.gates {
		rd, err := gi.Open()
		if err != nil {
			return false
		}
		_, err = io.Copy(io.Discard, rd)
		rd.Close()
		if err != nil {
			return false
		}
	}
	var n uint64
	if err := r.objs.GateHits.Get(&n); err != nil {
		return false
	}
	return n == 0
}

func (r *recvRunner) loop(e *Enforcer) {
	defer close(r.done)
	t := time.NewTimer(RecvPeriod)
	defer t.Stop()
	var seen uint64
	quiet := recvLinger
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		if r.idle() {
			r.skipped.Add(1)
			quiet = recvLinger
			t.Reset(RecvIdlePeriod)
			continue
		}
		err := e.runRecv(r)
		// Fast while some background socket received in the last
		// recvLinger runs (a download's data can pause for a run).
		var n uint64
		_ = r.objs.RlStats.Lookup(uint32(0), &n) // RL_SOCKETS
		if n != seen {
			quiet = 0
		} else {
			quiet++
		}
		if quiet < recvLinger {
			t.Reset(RecvPeriod)
		} else {
			t.Reset(RecvIdlePeriod)
		}
		seen = n
		r.mu.Lock()
		if err != nil && r.err == nil {
			e.logf("netsched: %v", err)
		}
		r.err = err
		r.mu.Unlock()
	}
}

// close stops the runner; the sockets it clamped keep their last window
// until they close. Before the programs go, one last run with no lane
// asking lifts the clamps (the caller cleared lane_flags' ledbat bits, or
// closes them with the maps).
func (r *recvRunner) close() error {
	if r == nil {
		return nil
	}
	close(r.stop)
	<-r.done
	errs := []error{r.it.Close()}
	for _, gi := range r.gates {
		errs = append(errs, gi.Close())
	}
	return errors.Join(append(errs, r.objs.Close())...)
}

// RecvStats returns the receive-side counters; ok is false when the
// runner does not run.
func (e *Enforcer) RecvStats() (s RecvStats, ok bool) {
	e.mu.Lock()
	r := e.recv
	e.mu.Unlock()
	if r == nil {
		return RecvStats{}, false
	}
	for i, p := range []*uint64{&s.Sockets, &s.Clamped, &s.Released} {
		var v uint64
		if err := r.objs.RlStats.Lookup(uint32(i), &v); err == nil {
			*p = v
		}
	}
	s.Runs, s.Skipped = r.runs.Load(), r.skipped.Load()
	return s, true
}

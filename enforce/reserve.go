package enforce

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// SchedRecord is the record of a process whose threads a reservation put
// under SCHED_DEADLINE: each thread's own policy and nice.
type SchedRecord = threadRecord[cpu.ThreadSched]

// Reserve puts threads of pid under SCHED_DEADLINE, each with its runtime
// in every period. Each thread's own policy is recorded before its first
// change; Unreserve gives them back. Threads already under deadline
// scheduling with that runtime are left alone, and so are threads under
// a real-time or deadline policy lanes did not give them. The first
// error is the kernel's refusal (EBUSY: no room in its admission
// control; EPERM: the thread may not run on every CPU), after which the
// threads changed so far keep their record.
func (e *Engine) Reserve(pid int, runtimes map[int]time.Duration, period time.Duration, laneName string) error {
	key := strconv.Itoa(pid)
	var rec SchedRecord
	err := e.store.Get(state.KindSched, key, &rec)
	switch {
	case errors.Is(err, state.ErrNotFound):
		st, err := procfs.ReadStat(pid)
		if err != nil {
			return cpu.ErrGone
		}
		rec = SchedRecord{PID: pid, StartTime: st.StartTime, Lane: laneName, Threads: map[int]cpu.ThreadSched{}}
	case err != nil:
		return fmt.Errorf("reserve pid %d: %w", pid, err)
	}
	before := maps.Clone(rec.Threads)
	var todo []int
	for tid := range runtimes {
		own, recorded := rec.Threads[tid]
		cur, err := cpu.GetThreadSched(tid)
		if err != nil {
			continue // ended
		}
		if !recorded {
			if cur.Policy != 0 && cur.Policy != 3 && cur.Policy != 5 { // not SCHED_NORMAL, _BATCH, _IDLE
				continue // real-time or deadline of its own: not lanes' to change
			}
			own = cur
			rec.Threads[tid] = own
		}
		if cur.Policy == cpu.SchedDeadline {
			if rt, err := cpu.DeadlineRuntime(tid); err == nil && rt == runtimes[tid] {
				continue
			}
		}
		todo = append(todo, tid)
	}
	if !maps.Equal(before, rec.Threads) {
		if err := e.store.Put(state.KindSched, key, rec); err != nil {
			return fmt.Errorf("reserve pid %d: record: %w", pid, err)
		}
	}
	if len(todo) > 0 {
		e.debug("reserve: pid %d (lane %s): threads %v to SCHED_DEADLINE every %v (runtimes %v); own policies recorded %v", pid, laneName, todo, period, runtimes, rec.Threads)
	}
	for _, tid := range todo {
		if err := cpu.SetThreadDeadline(tid, runtimes[tid], period); err != nil && !errors.Is(err, cpu.ErrGone) {
			return fmt.Errorf("reserve pid %d: %w", pid, err)
		}
	}
	return nil
}

// Reserved says whether pid has a reservation record.
func (e *Engine) Reserved(pid int) bool {
	var rec SchedRecord
	return e.store.Get(state.KindSched, strconv.Itoa(pid), &rec) == nil
}

// Unreserve gives pid's threads their own scheduling back and drops the
// record; nothing to do for a process without one.
func (e *Engine) Unreserve(pid int) error {
	return dropRecord(e, state.KindSched, "unreserve", pid, e.giveBackSched)
}

// giveBackSched sets the recorded threads' own scheduling, and where
// SCHED_IDLE stands in for the group's cpu.idle, threads in an idle (or
// reserved) lane take it back.
func (e *Engine) giveBackSched(rec SchedRecord) error {
	if !alive(rec.PID, rec.StartTime) {
		e.debug("reserve: pid %d (lane %s) ended: its record goes", rec.PID, rec.Lane)
		return nil
	}
	var errs []error
	e.debug("reserve: pid %d (lane %s): recorded threads %v get their own policies back", rec.PID, rec.Lane, rec.Threads)
	errs = append(errs, giveBackThreads(rec, cpu.SetThreadSched, nil))
	e.debugStillDeadline(rec)
	if l := e.ensuredLane(rec.Lane); l != nil {
		if err := e.CPU.JoinThreads(rec.PID, l.CPU); err != nil && !errors.Is(err, cpu.ErrGone) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// debugStillDeadline logs, at debug level, the threads of rec's process
// that are under SCHED_DEADLINE after their own policies were given back:
// a thread lanes put there without a record would show here.
func (e *Engine) debugStillDeadline(rec SchedRecord) {
	e.mu.Lock()
	on := e.debugf != nil
	e.mu.Unlock()
	if !on {
		return
	}
	tids, err := procfs.Threads(rec.PID)
	if err != nil {
		return
	}
	for _, tid := range tids {
		if s, err := cpu.GetThreadSched(tid); err == nil && s.Policy == cpu.SchedDeadline {
			_, recorded := rec.Threads[tid]
			e.debug("reserve: pid %d: thread %d still under SCHED_DEADLINE after the give-back (recorded: %v)", rec.PID, tid, recorded)
		}
	}
}

// RestoreReserves gives back every recorded reservation: at stop, in
// lanesd --cleanup, and at start for those a crashed lanesd left. It
// returns how many processes it reached.
func (e *Engine) RestoreReserves() (int, error) {
	return restoreRecords(e, state.KindSched, "reservation", e.giveBackSched)
}

// ensuredLane is the lane last ensured under name (nil: none yet, as at
// a start after a crash).
func (e *Engine) ensuredLane(name string) *lane.Lane {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ensured[name]
}

// UnreserveThread gives one thread of pid its own scheduling back and
// drops it from the record (the process keeps its reservation): for a
// deadline thread the kernel left waiting to pay back an overrun.
func (e *Engine) UnreserveThread(pid, tid int) error {
	key := strconv.Itoa(pid)
	var rec SchedRecord
	if err := e.store.Get(state.KindSched, key, &rec); err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("unreserve thread %d of %d: %w", tid, pid, err)
	}
	own, ok := rec.Threads[tid]
	if !ok {
		e.debug("reserve: pid %d: thread %d has no record to give back", pid, tid)
		return nil
	}
	e.debug("reserve: pid %d: thread %d gets its own policy back (%+v)", pid, tid, own)
	if err := cpu.SetThreadSched(tid, own); err != nil && !errors.Is(err, cpu.ErrGone) {
		return err
	}
	delete(rec.Threads, tid)
	if err := e.store.Put(state.KindSched, key, rec); err != nil {
		return fmt.Errorf("unreserve thread %d of %d: record: %w", tid, pid, err)
	}
	if l := e.ensuredLane(rec.Lane); l != nil {
		if err := e.CPU.JoinThreads(pid, l.CPU); err != nil && !errors.Is(err, cpu.ErrGone) {
			return err
		}
	}
	return nil
}

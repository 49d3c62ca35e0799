package enforce

import (
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/state"
)

// NiceRecord is the record of a process whose threads' nice values a
// boost changed: each thread's own nice.
type NiceRecord = threadRecord[int]

// Boost sets nice on every thread of pid, never above a thread's own
// priority (a thread at -10 keeps -10 under a -5 boost). The threads' own
// values are recorded before the first change; Unboost gives them back.
func (e *Engine) Boost(pid, nice int, laneName string) error {
	key := strconv.Itoa(pid)
	var rec NiceRecord
	err := e.store.Get(state.KindNice, key, &rec)
	switch {
	case errors.Is(err, state.ErrNotFound):
		st, err := procfs.ReadStat(pid)
		if err != nil {
			return cpu.ErrGone
		}
		rec = NiceRecord{PID: pid, StartTime: st.StartTime, Lane: laneName, Threads: map[int]int{}}
	case err != nil:
		return fmt.Errorf("boost pid %d: %w", pid, err)
	}
	tids, err := procfs.Threads(pid)
	if err != nil {
		return cpu.ErrGone
	}
	before := maps.Clone(rec.Threads)
	for _, tid := range tids {
		if _, ok := rec.Threads[tid]; ok {
			continue
		}
		own, err := cpu.ThreadNice(tid)
		if err != nil {
			continue // the thread ended
		}
		rec.Threads[tid] = own
	}
	if !maps.Equal(before, rec.Threads) {
		if err := e.store.Put(state.KindNice, key, rec); err != nil {
			return fmt.Errorf("boost pid %d: record: %w", pid, err)
		}
	}
	// Only threads of pid now: an ended thread's id may be reused by
	// another process's thread.
	var errs []error
	for _, tid := range tids {
		own, ok := rec.Threads[tid]
		if !ok {
			continue
		}
		if err := cpu.SetThreadNice(tid, min(nice, own)); err != nil && !errors.Is(err, cpu.ErrGone) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Unboost gives pid's threads their own nice values back and drops the
// record; nothing to do for a process that was never boosted.
func (e *Engine) Unboost(pid int) error {
	return dropRecord(e, state.KindNice, "unboost", pid, e.giveBack)
}

// giveBack sets the recorded threads' own nice values.
func (e *Engine) giveBack(rec NiceRecord) error {
	return giveBackThreads(rec, cpu.SetThreadNice)
}

// RestoreBoosts gives back every recorded boost: at stop, in lanesd
// --cleanup, and at start for the boosts a crashed lanesd left (boosting
// starts over). It returns how many processes it reached.
func (e *Engine) RestoreBoosts() (int, error) {
	return restoreRecords(e, state.KindNice, "boost", e.giveBack)
}

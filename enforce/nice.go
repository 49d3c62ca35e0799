package enforce

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/state"
)

// NiceRecord is the record of a process whose threads a boost changed:
// each thread's own nice, and its own EEVDF slice where a boost set one.
type NiceRecord = threadRecord[OwnFair]

// OwnFair is what a boost recorded of one thread before changing it.
type OwnFair struct {
	Nice int `json:"nice"`
	// Slice is the thread's own EEVDF slice (0: the kernel's default);
	// nil while no boost changed it.
	Slice *time.Duration `json:"slice_ns,omitempty"`
}

// UnmarshalJSON also reads a bare number: the nice-only record of an
// earlier lanesd, which a crash may have left.
func (o *OwnFair) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*o = OwnFair{Nice: n}
		return nil
	}
	type plain OwnFair
	return json.Unmarshal(b, (*plain)(o))
}

// Boost sets nice on every thread of pid, never above a thread's own
// priority (a thread at -10 keeps -10 under a -5 boost), and, when slice
// is not zero, gives each fair thread that EEVDF slice (cpu.SliceMin to
// cpu.SliceMax; callers check cpu.DefaultSlice first). The threads' own
// values are recorded before the first change; Unboost gives them back.
// A thread started after a boost inherits it (nice and slice are copied
// on clone): it is recorded with the process's own values, and given
// them back, whether or not a later Boost listed it.
func (e *Engine) Boost(pid, nice int, slice time.Duration, laneName string) error {
	if slice != 0 && (slice < cpu.SliceMin || slice > cpu.SliceMax) {
		return fmt.Errorf("boost pid %d: slice %v outside %v..%v", pid, slice, cpu.SliceMin, cpu.SliceMax)
	}
	key := strconv.Itoa(pid)
	var rec NiceRecord
	err := e.store.Get(state.KindNice, key, &rec)
	switch {
	case errors.Is(err, state.ErrNotFound):
		st, err := procfs.ReadStat(pid)
		if err != nil {
			return cpu.ErrGone
		}
		rec = NiceRecord{PID: pid, StartTime: st.StartTime, Lane: laneName, Threads: map[int]OwnFair{}}
	case err != nil:
		return fmt.Errorf("boost pid %d: %w", pid, err)
	}
	// Threads started while this runs may have been started by one not
	// yet changed: they are listed again and reached in a later pass.
	done := map[int]bool{}
	var errs []error
	prev := rec.Applied // a thread started meanwhile may run at the last level still
	for pass := 0; pass < 4; pass++ {
		tids, err := procfs.Threads(pid)
		if err != nil {
			if pass == 0 {
				return cpu.ErrGone
			}
			break
		}
		var fresh []int
		for _, tid := range tids {
			if !done[tid] {
				fresh = append(fresh, tid)
			}
		}
		if len(fresh) == 0 {
			break
		}
		if err := e.recordFair(&rec, key, fresh, nice, slice, prev); err != nil {
			return err
		}
		// Only threads of pid now: an ended thread's id may be reused
		// by another process's thread.
		for _, tid := range fresh {
			done[tid] = true
			own, ok := rec.Threads[tid]
			if !ok {
				continue
			}
			n := min(nice, own.Nice)
			var err error
			if slice != 0 && own.Slice != nil {
				err = cpu.SetThreadNiceSlice(tid, n, slice)
			} else {
				err = cpu.SetThreadNice(tid, n)
			}
			if err != nil && !errors.Is(err, cpu.ErrGone) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// recordFair records the own values of the threads tids not yet in rec,
// and what the boost sets now (nice, slice), and stores rec when either
// changed: before anything is set. prev is what the boost had set before
// this change, which a thread started during it may have inherited.
func (e *Engine) recordFair(rec *NiceRecord, key string, tids []int, nice int, slice time.Duration, prev *OwnFair) error {
	before := maps.Clone(rec.Threads)
	changed := false
	for _, tid := range tids {
		own, known := rec.Threads[tid]
		if !known {
			// A thread started since the last boost inherited it from
			// the thread that started it: its own values are the
			// process's. Otherwise (the first boost, or a thread started
			// by one not yet changed) they are its own.
			var inherited bool
			if own, inherited = inheritedFair(tid, *rec); !inherited && prev != nil {
				earlier := *rec
				earlier.Applied = prev
				own, inherited = inheritedFair(tid, earlier)
			}
			if !inherited {
				n, err := cpu.ThreadNice(tid)
				if err != nil {
					continue // the thread ended
				}
				own = OwnFair{Nice: n}
			}
		}
		if slice != 0 && own.Slice == nil {
			// Read before the first slice this thread gets: until then
			// its slice is its own.
			s, ok, err := cpu.ThreadSlice(tid)
			if err != nil {
				continue
			}
			if ok {
				own.Slice = &s
			}
		}
		if !known || own.Slice != before[tid].Slice {
			rec.Threads[tid] = own
			changed = true
		}
	}
	// What the process's threads get now, which a thread they start
	// inherits.
	applied := OwnFair{Nice: nice}
	if lead, ok := rec.Threads[rec.PID]; ok {
		applied.Nice = min(nice, lead.Nice)
	}
	if slice != 0 {
		applied.Slice = &slice
	}
	if rec.Applied == nil || !sameFair(*rec.Applied, applied) {
		rec.Applied = &applied
		changed = true
	}
	if !changed {
		return nil
	}
	if err := e.store.Put(state.KindNice, key, *rec); err != nil {
		return fmt.Errorf("boost pid %d: record: %w", rec.PID, err)
	}
	return nil
}

// Unboost gives pid's threads their own nice values (and slices) back and
// drops the record; nothing to do for a process that was never boosted.
func (e *Engine) Unboost(pid int) error {
	return dropRecord(e, state.KindNice, "unboost", pid, e.giveBack)
}

// giveBack sets the recorded threads' own nice values and slices, and
// the process's own on threads started since that inherited the boost.
func (e *Engine) giveBack(rec NiceRecord) error {
	return giveBackThreads(rec, func(tid int, own OwnFair) error {
		if own.Slice != nil {
			return cpu.SetThreadNiceSlice(tid, own.Nice, *own.Slice)
		}
		return cpu.SetThreadNice(tid, own.Nice)
	}, inheritedFair)
}

// inheritedFair says whether a thread the record does not hold inherited
// the boost (it runs at the nice the boost set last) and if so returns
// the process's own values (its main thread's) as the thread's. A thread
// at another nice was changed by someone else, and is left alone.
func inheritedFair(tid int, rec NiceRecord) (OwnFair, bool) {
	lead, ok := rec.Threads[rec.PID]
	if rec.Applied == nil || !ok {
		return OwnFair{}, false
	}
	n, err := cpu.ThreadNice(tid)
	if err != nil || n != rec.Applied.Nice {
		return OwnFair{}, false
	}
	own := OwnFair{Nice: lead.Nice}
	if rec.Applied.Slice != nil {
		own.Slice = lead.Slice
	}
	return own, true
}

// sameFair reports whether two values are equal, slices compared by
// value.
func sameFair(a, b OwnFair) bool {
	if a.Nice != b.Nice || (a.Slice == nil) != (b.Slice == nil) {
		return false
	}
	return a.Slice == nil || *a.Slice == *b.Slice
}

// RestoreBoosts gives back every recorded boost: at stop, in lanesd
// --cleanup, and at start for the boosts a crashed lanesd left (boosting
// starts over). It returns how many processes it reached.
func (e *Engine) RestoreBoosts() (int, error) {
	return restoreRecords(e, state.KindNice, "boost", e.giveBack)
}

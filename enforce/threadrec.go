package enforce

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/state"
)

// threadRecord is the record of a process some of whose threads lanes
// changed (a boost's nice, a reservation's policy): each thread's own
// value, given back when the change ends, when lanesd stops, and at the
// next start after a crash.
type threadRecord[T any] struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	Lane      string `json:"lane"`
	// Threads maps each thread the change reached to its own value.
	Threads map[int]T `json:"threads"`
	// Applied is the value the change set last, where a thread the
	// process starts later inherits it (nice and slice do; a deadline
	// policy does not, reset on fork): nil when not recorded.
	Applied *T `json:"applied,omitempty"`
}

// giveBackThreads sets each recorded thread's own value with set, if the
// process is the one recorded (not a later process under a reused PID),
// and only on its threads now (a thread id may be reused). A thread not
// in the record gets what inherited returns for it, if it says so (nil:
// such threads are left alone).
func giveBackThreads[T any](rec threadRecord[T], set func(tid int, own T) error, inherited func(tid int, rec threadRecord[T]) (T, bool)) error {
	if !alive(rec.PID, rec.StartTime) {
		return nil
	}
	tids, err := procfs.Threads(rec.PID)
	if err != nil {
		return nil // it ended meanwhile
	}
	var errs []error
	for _, tid := range tids {
		own, ok := rec.Threads[tid]
		if !ok && inherited != nil {
			own, ok = inherited(tid, rec)
		}
		if !ok {
			continue
		}
		if err := set(tid, own); err != nil && !errors.Is(err, cpu.ErrGone) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dropRecord gives pid's record of kind back and deletes it; nothing to
// do for a process without one. A record whose threads could not all be
// given back is kept. what names the change in errors.
func dropRecord[T any](e *Engine, kind, what string, pid int, giveBack func(threadRecord[T]) error) error {
	key := strconv.Itoa(pid)
	var rec threadRecord[T]
	if err := e.store.Get(kind, key, &rec); err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("%s pid %d: %w", what, pid, err)
	}
	if err := giveBack(rec); err != nil {
		// The record stays: what could not be given back now is given
		// back at stop, by lanesd --cleanup or after a crash.
		return err
	}
	return e.store.Delete(kind, key)
}

// restoreRecords gives back and deletes every record of kind (keeping
// those it could not give back whole, for the next try): at stop,
// in lanesd --cleanup, and at start for those a crashed lanesd left. It
// returns how many processes it reached. what names the records in
// errors.
func restoreRecords[T any](e *Engine, kind, what string, giveBack func(threadRecord[T]) error) (int, error) {
	recs, err := e.store.List(kind)
	if err != nil {
		return 0, fmt.Errorf("%s records: %w", what, err)
	}
	var errs []error
	n := 0
	for _, r := range recs {
		var rec threadRecord[T]
		if err := json.Unmarshal(r.Data, &rec); err != nil {
			errs = append(errs, fmt.Errorf("%s record %s: %w", what, r.Key, err))
		} else if err := giveBack(rec); err != nil {
			// Kept for the next try (lanesd --cleanup, the next start).
			errs = append(errs, err)
			continue
		} else {
			n++
		}
		if err := e.store.Delete(kind, r.Key); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

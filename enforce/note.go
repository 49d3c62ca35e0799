package enforce

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/state"
)

// The second record: besides the state store, each lane's group keeps a
// note (an extended attribute of its directory, see cgroup.Group.SetNote)
// per process moved into it, with the same ProcRecord. It is written
// before the process joins and removed when its record goes, so that where
// a process came from survives a state database that is lost, truncated
// or corrupt: Recover rebuilds the store's records from the notes.

// noteState counts notes that could not be written (a host without
// cgroupfs xattrs, or with only "user." ones and their limit reached).
type noteState struct {
	mu       sync.Mutex
	failures int
	lastErr  error
}

func noteKey(pid int) string { return "p." + strconv.Itoa(pid) }

// writeNote stores rec in g's notes. A failure does not fail the move (the
// state store has the record); it is counted and shown by NoteProblem.
func (e *Engine) writeNote(g cgroup.Group, rec ProcRecord) bool {
	b, err := json.Marshal(rec)
	if err != nil {
		e.noteFailed(rec.PID, err)
		return false
	}
	return e.writeNoteJSON(g, rec.PID, b)
}

// writeNoteJSON is writeNote with the record already encoded. It reports
// whether the note was written.
func (e *Engine) writeNoteJSON(g cgroup.Group, pid int, b []byte) bool {
	if err := g.SetNote(noteKey(pid), b); err != nil {
		e.noteFailed(pid, err)
		return false
	}
	return true
}

func (e *Engine) noteFailed(pid int, err error) {
	e.notes.mu.Lock()
	first := e.notes.failures == 0
	e.notes.failures++
	e.notes.lastErr = err
	e.notes.mu.Unlock()
	if first {
		e.logf("second record of process %d in its group: %v (the state database is its only record)", pid, err)
	}
}

// removeNote drops the note of pid from the group of laneName.
func (e *Engine) removeNote(laneName string, pid int) {
	if err := e.Group(laneName).RemoveNote(noteKey(pid)); err != nil && !errors.Is(err, cgroup.ErrNoNotes) {
		e.logf("remove second record of process %d: %v", pid, err)
	}
}

// NoteProblem describes why some moves have no second record ("" when
// every note was written).
func (e *Engine) NoteProblem() string {
	e.notes.mu.Lock()
	defer e.notes.mu.Unlock()
	if e.notes.failures == 0 {
		return ""
	}
	return fmt.Sprintf("%d process records could not be kept in their lane's group as well (last: %v): "+
		"a corrupt state database would lose where those processes came from", e.notes.failures, e.notes.lastErr)
}

// Recovery is what Recover found.
type Recovery struct {
	// Rebuilt counts the process records the state store lacked (or held
	// for another process with the same PID) and that were rebuilt from
	// the groups' notes.
	Rebuilt int
	// Groups counts lanes' groups that exist but were not in the store
	// (now recorded).
	Groups int
	// Pruned counts notes of processes that are gone or no longer in a
	// lane (removed).
	Pruned int
}

// Recover compares the state store with the notes kept by lanes' groups
// (this engine's groups, not those of a live `lanes run`) and rebuilds
// every process record the store lacks for a live process still in a
// lane, and every group record. Notes of processes that are gone, or no
// longer in one of lanes' groups, are removed. Run at start, before
// anything else uses the records: a store that lost records (truncated,
// replaced, or moved aside as corrupt) is then whole again, and Rebuilt
// says that it was not.
func (e *Engine) Recover() (Recovery, error) {
	var rc Recovery
	groups, err := e.H.ListGroups(e.groupName(""))
	if err != nil {
		return rc, fmt.Errorf("recover records: %w", err)
	}
	var errs []error
	for _, g := range groups {
		if isPrivateRunGroup(g.Name()) || (e.groupName("") == cgroup.Prefix && strings.HasPrefix(g.Name(), RunGroupPrefix)) {
			continue
		}
		var gr GroupRecord
		if err := e.store.Get(state.KindGroup, g.Name(), &gr); errors.Is(err, state.ErrNotFound) {
			laneName := strings.TrimPrefix(g.Name(), e.groupName(""))
			if err := e.store.Put(state.KindGroup, g.Name(), GroupRecord{Name: g.Name(), Lane: laneName, Dirs: g.Dirs()}); err != nil {
				errs = append(errs, err)
			} else {
				rc.Groups++
			}
		} else if err != nil {
			errs = append(errs, err)
		}
		notes, err := g.Notes("p.")
		if errors.Is(err, cgroup.ErrNoNotes) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
		}
		for key, val := range notes {
			var rec ProcRecord
			if err := json.Unmarshal(val, &rec); err != nil || key != noteKey(rec.PID) || rec.PID <= 0 {
				g.RemoveNote(key)
				rc.Pruned++
				continue
			}
			now, merr := cgroup.ProcMembership(rec.PID)
			if !alive(rec.PID, rec.StartTime) || merr != nil || !e.inLaneGroup(now) {
				g.RemoveNote(key)
				rc.Pruned++
				continue
			}
			var have ProcRecord
			err := e.store.Get(state.KindProc, strconv.Itoa(rec.PID), &have)
			if err == nil && have.StartTime == rec.StartTime {
				continue
			}
			if err != nil && !errors.Is(err, state.ErrNotFound) {
				errs = append(errs, err)
				continue
			}
			if err := e.store.Put(state.KindProc, strconv.Itoa(rec.PID), rec); err != nil {
				errs = append(errs, err)
				continue
			}
			e.noteRecordedStart(rec.PID, rec.StartTime, rec.Lane)
			rc.Rebuilt++
		}
	}
	return rc, errors.Join(errs...)
}

package enforce

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/state"
)

// The second record: besides the state store, each lane's group keeps a
// note (an extended attribute of its directory, see cgroup.Group.SetNote)
// with the ProcRecord of each process moved into it. It is written before
// the process joins and removed when its record goes, so that where a
// process came from survives a state database that is lost, truncated or
// corrupt: Recover rebuilds the store's records from the notes.
//
// A move writes a note of its own per process ("p.<pid>"). A rule
// placement's batch writes one note for all its processes ("b.<run>.<n>",
// a JSON array of their records): a storm's processes cost one attribute
// written per batch, not one per process, and one removed when the
// batch's last process is gone (batchNotes counts them). Where a process
// has both (a record changed after its placement), its own note is the
// newer. Recover turns the batch notes it finds into notes of their own.

// noteState counts notes that could not be written (a host without
// cgroupfs xattrs, or with only "user." ones and their limit reached).
type noteState struct {
	mu       sync.Mutex
	failures int
	lastErr  error
}

func noteKey(pid int) string { return "p." + strconv.Itoa(pid) }

// batchNotePrefix starts the key of a batch's note.
const batchNotePrefix = "b."

// batchNoteMax is the most bytes one batch note holds (the kernel's limit
// on an attribute's value is 64 KiB); a larger batch writes several.
const batchNoteMax = 60 << 10

// batchNotes tracks the batch notes this engine wrote: which processes
// each still holds a record for, and each process's batch.
type batchNotes struct {
	mu   sync.Mutex
	run  string // this engine's start, in every key: no clash with an earlier run's notes
	seq  uint64
	live map[string]*batchNote // by key
	of   map[int]*batchNote    // by PID
	// own: processes in a batch note that also have a note of their own.
	own map[int]bool
}

type batchNote struct {
	key  string
	g    cgroup.Group
	live int
}

// writeBatchNotes stores the encoded records of pids (recs[i] of
// pids[i]) in g as batch notes and reports, for each, whether its record
// was written. A failure does not fail the placement (the state store
// then gets the record first); it is counted as writeNote's are.
func (e *Engine) writeBatchNotes(g cgroup.Group, pids []int, recs [][]byte) []bool {
	ok := make([]bool, len(pids))
	for start := 0; start < len(pids); {
		end, size := start, 2
		for end < len(pids) && (end == start || size+len(recs[end])+1 <= batchNoteMax) {
			size += len(recs[end]) + 1
			end++
		}
		buf := make([]byte, 0, size)
		buf = append(buf, '[')
		for i := start; i < end; i++ {
			if i > start {
				buf = append(buf, ',')
			}
			buf = append(buf, recs[i]...)
		}
		buf = append(buf, ']')
		e.batch.mu.Lock()
		if e.batch.live == nil {
			e.batch.live, e.batch.of, e.batch.own = map[string]*batchNote{}, map[int]*batchNote{}, map[int]bool{}
			e.batch.run = strconv.FormatInt(time.Now().UnixNano(), 36)
		}
		e.batch.seq++
		key := batchNotePrefix + e.batch.run + "." + strconv.FormatUint(e.batch.seq, 36)
		e.batch.mu.Unlock()
		if err := g.SetNote(key, buf); err != nil {
			e.noteFailed(pids[start], err)
			start = end
			continue
		}
		b := &batchNote{key: key, g: g, live: end - start}
		e.batch.mu.Lock()
		e.batch.live[key] = b
		for i := start; i < end; i++ {
			if old := e.batch.of[pids[i]]; old != nil {
				e.releaseLocked(old) // an older batch's record of this PID
			}
			e.batch.of[pids[i]] = b
			ok[i] = true
		}
		e.batch.mu.Unlock()
		start = end
	}
	return ok
}

// releaseLocked drops one process from batch note b, and the note with
// its last. e.batch.mu is held.
func (e *Engine) releaseLocked(b *batchNote) {
	b.live--
	if b.live > 0 {
		return
	}
	delete(e.batch.live, b.key)
	if err := b.g.RemoveNote(b.key); err != nil && !errors.Is(err, cgroup.ErrNoNotes) {
		e.logf("remove second records of a placement batch: %v", err)
	}
}

// dropNote removes pid's notes from g: its own, and its share of a batch
// note.
func (e *Engine) dropNote(g cgroup.Group, pid int) {
	if e.releaseBatch(pid) {
		return
	}
	g.RemoveNote(noteKey(pid))
}

// releaseBatch drops pid from its batch note, if it is in one, and reports
// whether its own note is known not to exist (nothing more to remove).
func (e *Engine) releaseBatch(pid int) bool {
	e.batch.mu.Lock()
	defer e.batch.mu.Unlock()
	b := e.batch.of[pid]
	if b == nil {
		return false
	}
	delete(e.batch.of, pid)
	own := e.batch.own[pid]
	delete(e.batch.own, pid)
	e.releaseLocked(b)
	return !own
}

// ownNoteWritten marks that pid has a note of its own (besides its share
// of a batch note, if any).
func (e *Engine) ownNoteWritten(pid int) {
	e.batch.mu.Lock()
	defer e.batch.mu.Unlock()
	if e.batch.of[pid] != nil {
		e.batch.own[pid] = true
	}
}

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
	e.ownNoteWritten(pid)
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

// removeNote drops the notes of pid from the group of laneName: its own,
// and its share of a batch note.
func (e *Engine) removeNote(laneName string, pid int) {
	if e.releaseBatch(pid) {
		return
	}
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

// recoverRecord checks the record rec, read from a note of g: it reports
// whether its process is still alive and in g's lane (else the note is of
// no use), and puts the record into the store where the store lacks it.
func (e *Engine) recoverRecord(g cgroup.Group, rec ProcRecord, rc *Recovery, errs *[]error) bool {
	now, merr := cgroup.ProcMembership(rec.PID)
	if !alive(rec.PID, rec.StartTime) || merr != nil || !e.inLaneGroup(now) {
		return false
	}
	var have ProcRecord
	err := e.store.Get(state.KindProc, strconv.Itoa(rec.PID), &have)
	if err == nil && have.StartTime == rec.StartTime {
		return true
	}
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		*errs = append(*errs, err)
		return true
	}
	if err := e.store.Put(state.KindProc, strconv.Itoa(rec.PID), rec); err != nil {
		*errs = append(*errs, err)
		return true
	}
	e.noteRecordedStart(rec.PID, rec.StartTime, rec.Lane)
	rc.Rebuilt++
	return true
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
		notes, err := g.Notes("")
		if errors.Is(err, cgroup.ErrNoNotes) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
		}
		// Notes of their own first: where a process has one besides its
		// share of a batch note, its own is the newer.
		seen := map[int]bool{}
		for key, val := range notes {
			if !strings.HasPrefix(key, "p.") {
				continue
			}
			var rec ProcRecord
			if err := json.Unmarshal(val, &rec); err != nil || key != noteKey(rec.PID) || rec.PID <= 0 {
				g.RemoveNote(key)
				rc.Pruned++
				continue
			}
			seen[rec.PID] = true
			if !e.recoverRecord(g, rec, &rc, &errs) {
				g.RemoveNote(key)
				rc.Pruned++
			}
		}
		// Batch notes become notes of their own for the processes still
		// there, and go.
		for key, val := range notes {
			if !strings.HasPrefix(key, batchNotePrefix) {
				continue
			}
			var recs []ProcRecord
			if err := json.Unmarshal(val, &recs); err != nil {
				g.RemoveNote(key)
				rc.Pruned++
				continue
			}
			kept := true
			for _, rec := range recs {
				if rec.PID <= 0 || seen[rec.PID] {
					continue
				}
				seen[rec.PID] = true
				if !e.recoverRecord(g, rec, &rc, &errs) {
					rc.Pruned++
					continue
				}
				if !e.writeNote(g, rec) {
					kept = false
				}
			}
			if kept {
				g.RemoveNote(key)
			}
		}
	}
	return rc, errors.Join(errs...)
}

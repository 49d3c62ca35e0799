package enforce

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/lanes-qos/lanes/disk"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// Placement is a process a rule puts into a lane, as the caller read it
// at its exec: rules place processes that are in no lane.
type Placement struct {
	PID       int
	StartTime uint64            // from /proc/PID/stat, against PID reuse
	From      cgroup.Membership // where it is now: where it goes back to
	Threads   int               // from /proc/PID/stat
	Why       string            // "rule:12"
}

// Placed is the outcome of one Placement.
type Placed struct {
	PID int
	// Err is why it was not placed; wraps ErrNoProcess when it exited.
	Err error
	// Descendants are children it had forked before it joined, moved
	// after it, and, where systemd owns the tree, the other processes of
	// the scope it was in (Unit), which moves whole.
	Descendants []int
	Unit        string
}

// Settler tells, for processes just moved into their lane and given its
// I/O priority, what they still have outside it (procwatch.Settler, a BPF
// program run once for a batch). Settle answers for each of procs in
// order, at most MaxSettle() at a time.
type Settler interface {
	Settle(procs []SettleProc) ([]Settled, error)
	MaxSettle() int
}

// SettleProc is a process to check: its PID and start time (clock ticks).
type SettleProc struct {
	PID   int
	Start uint64
}

// Settled is what a process still has outside its new groups.
type Settled struct {
	// Gone: it exited, or its PID is another process's now.
	Gone bool
	// Threads: its thread count. Above one, threads it started before its
	// I/O priority changed may keep the old one.
	Threads int
	// Children are child processes in other groups than its own (some of
	// them, with MoreChildren set when there are more).
	Children     []int
	MoreChildren bool
	// Sockets: it may hold a socket.
	Sockets bool
}

// PlaceBatch puts many new processes into lane l at the cost of few
// commits. Each process's record is written before it changes, as Move's
// are, but first in its lane's group (the second record, an extended
// attribute) and staged in the store (state.PutLater): the store writes it
// once it is flushAge old (FlushRecords, after every placement batch and
// on a timer; the records due together in one transaction), and a process
// that exits before then (ForgetExited) never reaches the database. A crash in between loses no
// record: the next start rebuilds the records the store lacks from the
// groups' copies (Recover). Where the group's copy cannot be written, the
// record goes to the database, in one transaction for the batch, before
// the process joins. It is Move for a process storm: no authorisation
// check, and children forked before their parent joined are moved after
// it (by Move). A process already in a lane is left alone.
func (e *Engine) PlaceBatch(l *lane.Lane, ps []Placement) ([]Placed, error) {
	g, err := e.ensureCached(l)
	if err != nil {
		return nil, err
	}
	out := make([]Placed, len(ps))
	recs := make([]ProcRecord, len(ps))
	encoded := make([][]byte, len(ps))
	// tids are each process's threads as listed for the record: the first
	// walk of its I/O priority goes over them.
	tids := make([][]int, len(ps))
	now := time.Now()
	for i, p := range ps {
		out[i].PID = p.PID
		if e.inLaneGroup(p.From) {
			out[i].Err = fmt.Errorf("process %d is in a lane already (%+v)", p.PID, p.From)
			continue
		}
		if se := e.SplitOf(p.PID, p.From, l.Name); se != nil {
			out[i].Err = se
			continue
		}
		tids[i] = []int{p.PID}
		if p.Threads > 1 {
			if t, err := cgroup.Threads(p.PID); err == nil {
				tids[i] = t
			}
		}
		recs[i] = ProcRecord{PID: p.PID, StartTime: p.StartTime, Lane: l.Name, Why: p.Why, Orig: p.From,
			IOPrio: disk.Snapshot(tids[i]), Moved: now}
		b, err := json.Marshal(recs[i])
		if err != nil {
			out[i].Err = fmt.Errorf("encode record of %d: %w", p.PID, err)
			continue
		}
		encoded[i] = b
	}
	// Record first: a crash after a change still knows where each came
	// from, from the group's copy or from the database.
	var notePIDs []int
	var noteRecs [][]byte
	var noteIdx []int
	for i, p := range ps {
		if out[i].Err != nil {
			continue
		}
		e.noteRecordedStart(p.PID, p.StartTime, l.Name)
		notePIDs, noteRecs, noteIdx = append(notePIDs, p.PID), append(noteRecs, encoded[i]), append(noteIdx, i)
	}
	noted := make([]bool, len(ps))
	for k, ok := range e.writeBatchNotes(g, notePIDs, noteRecs) {
		noted[noteIdx[k]] = ok
	}
	var durable, later []state.Entry
	for i, p := range ps {
		if out[i].Err != nil {
			continue
		}
		ent := state.Entry{Kind: state.KindProc, Key: strconv.Itoa(p.PID), JSON: encoded[i]}
		if noted[i] {
			later = append(later, ent)
		} else {
			durable = append(durable, ent)
		}
	}
	if err := e.store.PutMany(durable); err != nil {
		for i, p := range ps {
			if out[i].Err == nil {
				e.dropNote(g, p.PID)
				e.dropRecorded(p.PID)
			}
		}
		return nil, fmt.Errorf("place %d processes in %s: %w", len(durable), l.Name, err)
	}
	e.store.PutLater(later)
	e.mu.Lock()
	settler := e.settler
	e.mu.Unlock()
	var gone []string
	saved := make([]disk.Saved, len(ps))
	for i, p := range ps {
		if out[i].Err != nil {
			continue
		}
		err := e.addProc(g, p.PID)
		if err == nil {
			if settler != nil {
				// Its other threads, if any, once the check has counted them.
				saved[i], err = disk.ApplyListed(p.PID, tids[i], l.Disk)
			} else {
				saved[i], err = disk.ApplyThreads(p.PID, tids[i], l.Disk)
			}
		}
		if err == nil {
			err = e.CPU.JoinThreads(p.PID, l.CPU)
		}
		if err != nil {
			if !isGone(err) && alive(p.PID, p.StartTime) {
				// Put back what changed; the record goes with it.
				e.H.Restore(p.PID, p.From)
				disk.RestoreProcess(p.PID, saved[i])
			} else {
				err = fmt.Errorf("process %d exited (%w): %v", p.PID, ErrNoProcess, err)
			}
			out[i].Err = err
			gone = append(gone, strconv.Itoa(p.PID))
			e.dropNote(g, p.PID)
			e.dropRecorded(p.PID)
			continue
		}
	}
	// What the moved processes still have outside the lane: asked of the
	// settler for the whole batch, or listed in /proc per process.
	var errs []error
	settled := e.settle(settler, ps, out)
	for i, p := range ps {
		if out[i].Err != nil || settler == nil {
			continue
		}
		if st := settled[i]; st != nil && (st.Gone || st.Threads <= 1) {
			continue
		}
		// Threads started before its priority changed (or not known).
		more, err := disk.ApplyThreads(p.PID, nil, l.Disk)
		if err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("I/O priority of the threads of %d: %w", p.PID, err))
		}
		for tid, v := range more {
			if _, ok := saved[i][tid]; !ok {
				saved[i][tid] = v
			}
		}
	}
	var fix, fixLater []state.Entry
	for i := range ps {
		if out[i].Err != nil {
			continue
		}
		rec := &recs[i]
		changed := false
		for tid, v := range saved[i] {
			if _, ok := rec.IOPrio[tid]; !ok {
				rec.IOPrio[tid] = v // a thread created since the snapshot
				changed = true
			}
		}
		if changed {
			ent := state.Entry{Kind: state.KindProc, Key: strconv.Itoa(rec.PID), Value: *rec}
			if noted[i] && e.writeNote(g, *rec) {
				fixLater = append(fixLater, ent)
			} else {
				fix = append(fix, ent)
			}
		}
	}
	if err := e.store.PutMany(fix); err != nil {
		errs = append(errs, err)
	}
	e.store.PutLater(fixLater)
	if err := e.store.DeleteMany(state.KindProc, e.store.DropLater(state.KindProc, gone)); err != nil {
		errs = append(errs, err)
	}
	// Children forked between the exec and the join stayed outside.
	for i, p := range ps {
		if out[i].Err != nil {
			continue
		}
		var outside []int
		if st := settled[i]; st != nil && !st.MoreChildren {
			if st.Gone {
				continue
			}
			outside = st.Children // in other groups than its own
		} else {
			d, err := children(p.PID, p.Threads)
			if err != nil || len(d) == 0 {
				continue
			}
			for _, c := range d {
				if m, err := cgroup.ProcMembership(c); err == nil && !e.inGroup(m, g) {
					outside = append(outside, c)
				}
			}
		}
		for _, c := range outside {
			if moved, err := e.Move([]int{c}, l, p.Why); err == nil {
				out[i].Descendants = append(out[i].Descendants, moved...)
			} else if !errors.Is(err, ErrNoProcess) {
				errs = append(errs, fmt.Errorf("child %d of %d: %w", c, p.PID, err))
			}
		}
	}
	// Under systemd the scope it left goes whole (see WithUnits): the
	// processes still in it follow.
	for i, p := range ps {
		if out[i].Err != nil {
			continue
		}
		unit, peers := e.scopePeers(p.From)
		if unit == "" || len(peers) == 0 {
			continue
		}
		if moved, err := e.Move(peers, l, p.Why); err == nil {
			for _, m := range moved {
				if m != p.PID && !slices.Contains(out[i].Descendants, m) {
					out[i].Descendants = append(out[i].Descendants, m)
				}
			}
			out[i].Unit = unit
		} else if !errors.Is(err, ErrNoProcess) {
			errs = append(errs, fmt.Errorf("the rest of %s, which %d left: %w", unit, p.PID, err))
		}
	}
	e.mu.Lock()
	n := e.net
	e.mu.Unlock()
	if n != nil {
		for i, p := range out {
			if p.Err != nil {
				continue
			}
			if st := settled[i]; st != nil && (st.Gone || !st.Sockets) {
				continue // no socket to follow it
			}
			if err := n.MoveSockets(p.PID, l.Name); err != nil && !isGone(err) {
				e.logf("move sockets of %d to %s: %v", p.PID, l.Name, err)
			}
		}
	}
	return out, errors.Join(errs...)
}

// settle asks s what the placed processes of ps (those without an error
// in out) still have outside their lane: the answer for ps[i] at [i], nil
// where there is none (no settler, or it failed: /proc is listed then).
func (e *Engine) settle(s Settler, ps []Placement, out []Placed) []*Settled {
	res := make([]*Settled, len(ps))
	if s == nil {
		return res
	}
	var idx []int
	var procs []SettleProc
	flush := func() {
		if len(procs) == 0 {
			return
		}
		got, err := s.Settle(procs)
		if err == nil && len(got) != len(procs) {
			err = fmt.Errorf("%d answers for %d processes", len(got), len(procs))
		}
		if err != nil {
			e.mu.Lock()
			e.settleFails++
			n, logNow := e.settleFails, time.Since(e.settleLogged) >= time.Minute
			if logNow {
				e.settleLogged = time.Now()
			}
			e.mu.Unlock()
			if logNow {
				e.logf("placement check of %d processes: %v (their threads, children and sockets are listed in /proc; %d batches so far)", len(procs), err, n)
			}
		} else {
			for k, i := range idx {
				res[i] = &got[k]
			}
		}
		idx, procs = idx[:0], procs[:0]
	}
	for i, p := range ps {
		if out[i].Err != nil {
			continue
		}
		idx = append(idx, i)
		procs = append(procs, SettleProc{PID: p.PID, Start: p.StartTime})
		if len(procs) == s.MaxSettle() {
			flush()
		}
	}
	flush()
	return res
}

// ensureCached is EnsureLane, skipped when this very lane (the same
// *lane.Lane, i.e. the same config) was ensured before and its group
// still exists, which is looked at once every existsEvery at most (a
// storm's batches come every few milliseconds; a group removed meanwhile
// fails the batch's moves, and the next look makes it again).
func (e *Engine) ensureCached(l *lane.Lane) (cgroup.Group, error) {
	now := time.Now()
	e.mu.Lock()
	done := e.ensured[l.Name] == l
	fresh := done && now.Sub(e.existsAt[l.Name]) < existsEvery
	e.mu.Unlock()
	g := e.Group(l.Name)
	if fresh {
		return g, nil
	}
	if done && g.Exists() {
		e.mu.Lock()
		e.existsAt[l.Name] = now
		e.mu.Unlock()
		return g, nil
	}
	return e.EnsureLane(l)
}

// existsEvery is how often ensureCached looks at a group's directories.
const existsEvery = time.Second

// ForgetExited drops the records of the processes in pids, which the
// kernel reported as exited (the proc connector's exit event comes after
// the process became a zombie), in one transaction. Each is checked
// against /proc first: an exec from a thread other than the leader
// reports the leader's exit under the process's PID, and the process
// lives on.
func (e *Engine) ForgetExited(pids []int) error {
	exits := make([]Exit, len(pids))
	for i, pid := range pids {
		exits[i] = Exit{PID: pid}
	}
	return e.ForgetGone(exits)
}

// Exit is a process the kernel reported gone: its PID and, where the
// source knows that the whole process exited (procwatch: its last thread
// did), its start time in clock ticks; 0 when not known.
type Exit struct {
	PID   int
	Start uint64
}

// ForgetGone is ForgetExited for exits that may carry their start time:
// a record with that start time is dropped without looking at /proc.
func (e *Engine) ForgetGone(exits []Exit) error {
	var keys []string
	var lanes []string
	for _, x := range exits {
		pid := x.PID
		e.recMu.Lock()
		m, known := e.recorded[pid]
		e.recMu.Unlock()
		if !known {
			continue
		}
		if m.start == 0 {
			var r ProcRecord
			if err := e.store.Get(state.KindProc, strconv.Itoa(pid), &r); err != nil {
				if errors.Is(err, state.ErrNotFound) {
					e.dropRecorded(pid)
				}
				continue
			}
			m = recMeta{start: r.StartTime, lane: r.Lane}
		}
		// The kernel reports a process's exit also when a thread other
		// than the leader execs (the leader is released, and the exec'ing
		// thread goes on under its PID): a Go program such as lanes run
		// exec's from any thread. Such a process is still alive. An exit
		// whose start time is the record's is the whole process's.
		if x.Start != 0 && x.Start != m.start {
			continue // another process that had this PID
		}
		if x.Start == 0 && alive(pid, m.start) {
			continue
		}
		e.dropRecorded(pid)
		keys = append(keys, strconv.Itoa(pid))
		lanes = append(lanes, m.lane)
	}
	if err := e.store.DeleteMany(state.KindProc, e.store.DropLater(state.KindProc, keys)); err != nil {
		return fmt.Errorf("forget exited processes: %w", err)
	}
	for i, k := range keys {
		if lanes[i] != "" {
			pid, _ := strconv.Atoi(k)
			e.removeNote(lanes[i], pid)
		}
	}
	return nil
}

// flushAge is how long a placement's record may wait in memory (with its
// copy in the group) before it is written to the database; flushMax is how
// many may wait.
const (
	flushAge = time.Second
	flushMax = 4096
)

// FlushRecords writes the records PlaceBatch staged that are flushAge
// old (all of them when more than flushMax wait). The placer calls it after
// every batch and on a timer.
func (e *Engine) FlushRecords() error {
	if err := e.store.FlushOlder(flushAge, flushMax); err != nil {
		return fmt.Errorf("write placement records: %w", err)
	}
	return nil
}

// Recorded reports whether pid may have a record (cheap: memory only).
func (e *Engine) Recorded(pid int) bool {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	_, ok := e.recorded[pid]
	return ok
}

// children is cgroup.Descendants, read with one file for a process of one
// thread (a process just exec'd, mostly).
func children(pid, threads int) ([]int, error) {
	if threads != 1 {
		return cgroup.Descendants(pid)
	}
	kids, err := procfs.Children(pid, pid)
	if err != nil || len(kids) == 0 {
		return nil, err
	}
	return cgroup.Descendants(pid)
}

// addProc moves pid into g through the group's open cgroup.procs files
// (opened on first use), or by AddProc where they cannot be kept open.
func (e *Engine) addProc(g cgroup.Group, pid int) error {
	e.mu.Lock()
	w, ok := e.procs[g.Name()]
	if !ok {
		var err error
		if w, err = g.OpenProcs(); err != nil {
			w = nil
		}
		// Under systemd the scope is not there before its first process
		// (AddProc starts it): open its files next time.
		if w != nil || !errors.Is(err, os.ErrNotExist) {
			e.procs[g.Name()] = w
		}
	}
	e.mu.Unlock()
	if w == nil {
		return g.AddProc(pid)
	}
	err := w.Add(pid)
	var pe *cgroup.ProcessError
	if err == nil || errors.As(err, &pe) {
		return err
	}
	// The group went away under the open files (removed and created
	// again): open them afresh next time, and move this one the long way.
	e.closeProcs(g.Name())
	return g.AddProc(pid)
}

// closeProcs closes the open cgroup.procs files of a group, if any.
func (e *Engine) closeProcs(groupName string) {
	e.mu.Lock()
	w := e.procs[groupName]
	delete(e.procs, groupName)
	e.mu.Unlock()
	if w != nil {
		w.Close()
	}
}

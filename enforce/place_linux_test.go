package enforce

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/disk"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// PlaceBatch records a batch, moves each process with its I/O priority,
// keeps the second record in the group, skips what is gone or already in a
// lane, and ForgetExited drops the records of those that exit; RestoreAll
// puts every survivor back with its I/O priority.
func TestPlaceBatch(t *testing.T) {
	testutil.RequireRoot(t)
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	prefix := testutil.UniqueName("lanes-t") + "-"
	e, err := New(Options{Store: store, GroupName: func(n string) string { return prefix + n }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.RestoreAll()
	l := &lane.Lane{Name: "batch", CPU: lane.CPU{Weight: 10}, Disk: lane.Disk{Class: lane.IOIdle}}
	var pids []int
	var kids []*testutil.Child
	var ps []Placement
	for i := range 5 {
		c := testutil.StartChild(t, "sleep 30s")
		c.Line(t) // ready
		kids = append(kids, c)
		pid := c.PID()
		if err := disk.SetIOPrio(pid, lane.IOBestEffort, i); err != nil {
			t.Fatal(err)
		}
		pi, err := ReadProcStat(pid)
		if err != nil {
			t.Fatal(err)
		}
		from, err := cgroup.ProcMembership(pid)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
		ps = append(ps, Placement{PID: pid, StartTime: pi.StartTime, From: from, Threads: pi.Threads, Why: "rule:1"})
	}
	gone := Placement{PID: 1 << 22, StartTime: 1, From: ps[0].From, Threads: 1, Why: "rule:1"}
	inLane := ps[0]
	inLane.From = cgroup.Membership{V2: "/" + prefix + "batch", V1: map[string]string{cgroup.CPU: "/" + prefix + "batch"}}
	out, err := e.PlaceBatch(l, append(append(ps, gone), inLane))
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		wantErr := i >= len(ps)
		if (o.Err != nil) != wantErr {
			t.Errorf("placement %d (pid %d): err %v, want error %v", i, o.PID, o.Err, wantErr)
		}
	}
	g := e.Group("batch")
	notes := notedRecords(t, g)
	if n := len(batchNoteKeys(t, g)); n != 1 {
		t.Errorf("%d batch notes, want the batch's one", n)
	}
	for _, pid := range pids {
		if m, _ := cgroup.ProcMembership(pid); !e.inGroup(m, g) {
			t.Errorf("process %d not in %s: %+v", pid, g.Name(), m)
		}
		if c, _, _ := disk.GetIOPrio(pid); c != lane.IOIdle {
			t.Errorf("process %d: I/O class %s, want idle", pid, c)
		}
		var rec ProcRecord
		if err := store.Get(state.KindProc, strconv.Itoa(pid), &rec); err != nil || rec.Why != "rule:1" {
			t.Errorf("record of %d: %+v, %v", pid, rec, err)
		}
		if note, ok := notes[pid]; !ok || note.StartTime != rec.StartTime {
			t.Errorf("second record of %d: %+v (found %v)", pid, note, ok)
		}
	}
	if n, _ := store.Count(); n < len(pids) {
		t.Errorf("%d records, want at least %d", n, len(pids))
	}
	// The first exits: its record and note go.
	kids[0].Cmd.Process.Kill()
	kids[0].Cmd.Wait()
	if err := e.ForgetExited([]int{pids[0], 424242}); err != nil {
		t.Fatal(err)
	}
	if err := store.Get(state.KindProc, strconv.Itoa(pids[0]), &ProcRecord{}); err == nil {
		t.Errorf("record of exited %d kept", pids[0])
	}
	// The batch note stays while others of its processes live.
	if n := len(batchNoteKeys(t, g)); n != 1 {
		t.Errorf("%d batch notes after one of its processes exited, want 1", n)
	}
	if err := e.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	for i, pid := range pids[1:] {
		if c, lvl, _ := disk.GetIOPrio(pid); c != lane.IOBestEffort || lvl != i+1 {
			t.Errorf("process %d after restore: %s/%d, want best-effort/%d", pid, c, lvl, i+1)
		}
		if m, _ := cgroup.ProcMembership(pid); m.V1[cgroup.CPU] != ps[i+1].From.V1[cgroup.CPU] {
			t.Errorf("process %d after restore: in %+v, want %+v", pid, m, ps[i+1].From)
		}
	}
}

// A batch's note stays while one of its processes lives and goes with
// the last; a process whose record changed after its placement has a note
// of its own, which goes with it.
func TestBatchNoteLifetime(t *testing.T) {
	testutil.RequireRoot(t)
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	prefix := testutil.UniqueName("lanes-t") + "-"
	e, err := New(Options{Store: store, GroupName: func(n string) string { return prefix + n }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.RestoreAll()
	l := &lane.Lane{Name: "batch", CPU: lane.CPU{Weight: 100}, Disk: lane.Disk{Class: lane.IOBestEffort, Level: 6}}
	var kids []*testutil.Child
	var ps []Placement
	for range 3 {
		c := testutil.StartChild(t, "sleep 30s")
		c.Line(t)
		kids = append(kids, c)
		pi, err := ReadProcStat(c.PID())
		if err != nil {
			t.Fatal(err)
		}
		from, err := cgroup.ProcMembership(c.PID())
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, Placement{PID: c.PID(), StartTime: pi.StartTime, From: from, Threads: pi.Threads, Why: "rule:1"})
	}
	out, err := e.PlaceBatch(l, ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out {
		if o.Err != nil {
			t.Fatalf("placement of %d: %v", o.PID, o.Err)
		}
	}
	g := e.Group("batch")
	if n := len(batchNoteKeys(t, g)); n != 1 {
		t.Fatalf("%d batch notes, want 1", n)
	}
	// One gets a note of its own (its record changed).
	rec := notedRecords(t, g)[ps[1].PID]
	rec.Why = "rule:2"
	if !e.writeNote(g, rec) {
		t.Fatal("note of its own not written")
	}
	for i, k := range kids {
		k.Cmd.Process.Kill()
		k.Cmd.Wait()
		if err := e.ForgetExited([]int{ps[i].PID}); err != nil {
			t.Fatal(err)
		}
		// (A batch note keeps the records of its dead processes until its
		// last goes: Recover passes over them.)
		if own, _ := g.Notes(noteKey(ps[i].PID)); len(own) != 0 {
			t.Errorf("after %d exited: its own note kept", ps[i].PID)
		}
		if n, want := len(batchNoteKeys(t, g)), map[bool]int{true: 0, false: 1}[i == len(kids)-1]; n != want {
			t.Errorf("after %d exited: %d batch notes, want %d", ps[i].PID, n, want)
		}
	}
}

// notedRecords returns the records g's notes keep, by PID: notes of their
// own over shares of batch notes.
func notedRecords(t *testing.T, g cgroup.Group) map[int]ProcRecord {
	t.Helper()
	notes, err := g.Notes("")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]ProcRecord{}
	for key, val := range notes {
		if strings.HasPrefix(key, batchNotePrefix) {
			var recs []ProcRecord
			if err := json.Unmarshal(val, &recs); err != nil {
				t.Fatalf("batch note %s: %v", key, err)
			}
			for _, r := range recs {
				if _, ok := out[r.PID]; !ok {
					out[r.PID] = r
				}
			}
		}
	}
	for key, val := range notes {
		if strings.HasPrefix(key, "p.") {
			var r ProcRecord
			if err := json.Unmarshal(val, &r); err != nil {
				t.Fatalf("note %s: %v", key, err)
			}
			out[r.PID] = r
		}
	}
	return out
}

// batchNoteKeys lists g's batch notes.
func batchNoteKeys(t *testing.T, g cgroup.Group) []string {
	t.Helper()
	notes, err := g.Notes(batchNotePrefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range notes {
		keys = append(keys, k)
	}
	return keys
}

// TestPlaceBatchCrashBeforeFlush: a placement's record waits in memory
// (its copy in the group) until it is flushAge old; a crash before then
// loses it from the database, and the next start rebuilds it from the
// group, so that a stop still puts the process back where it came from.
// The crash is a copy of the database files taken while the first engine
// runs (what a kill -9 would leave), opened by a second engine.
func TestPlaceBatchCrashBeforeFlush(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	store, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	prefix := testutil.UniqueName("lanes-t") + "-"
	opts := Options{Store: store, GroupName: func(n string) string { return prefix + n }}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l := &lane.Lane{Name: "crash", CPU: lane.CPU{Weight: 10}, Disk: lane.Disk{Class: lane.IOIdle}}
	c := testutil.StartChild(t, "sleep 30s")
	c.Line(t)
	pid := c.PID()
	pi, err := ReadProcStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	from, err := cgroup.ProcMembership(pid)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.PlaceBatch(l, []Placement{{PID: pid, StartTime: pi.StartTime, From: from, Threads: pi.Threads, Why: "rule:7"}})
	if err != nil || out[0].Err != nil {
		t.Fatalf("PlaceBatch = %+v, %v", out, err)
	}
	if n := store.Staged(); n != 1 {
		t.Fatalf("%d records staged, want 1 (the placement's, not yet due)", n)
	}
	if err := e.FlushRecords(); err != nil || store.Staged() != 1 {
		t.Fatalf("FlushRecords before flushAge: %v, %d staged; want it kept", err, store.Staged())
	}
	// The crash: the database as the disk has it now.
	crashed := t.TempDir()
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, state.FileName+suffix))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crashed, state.FileName+suffix), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	store2, err := state.Open(crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer store2.Close()
	if err := store2.Get(state.KindProc, strconv.Itoa(pid), &ProcRecord{}); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("record of %d in the crashed database: %v, want none (still staged when it crashed)", pid, err)
	}
	opts.Store = store2
	e2, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := e2.Recover()
	if err != nil || rc.Rebuilt != 1 {
		t.Fatalf("Recover = %+v, %v; want 1 record rebuilt", rc, err)
	}
	var rec ProcRecord
	if err := store2.Get(state.KindProc, strconv.Itoa(pid), &rec); err != nil || rec.Why != "rule:7" || rec.StartTime != pi.StartTime {
		t.Fatalf("rebuilt record: %+v, %v", rec, err)
	}
	// The batch's note became the process's own.
	g2 := e2.Group(l.Name)
	if keys := batchNoteKeys(t, g2); len(keys) != 0 {
		t.Errorf("batch notes %v kept after Recover", keys)
	}
	if own, err := g2.Notes(noteKey(pid)); err != nil || len(own) != 1 {
		t.Errorf("own note of %d after Recover: %v, %v", pid, own, err)
	}
	if err := e2.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	if m, _ := cgroup.ProcMembership(pid); m.V1[cgroup.CPU] != from.V1[cgroup.CPU] || m.V2 != from.V2 {
		t.Errorf("process %d after the restarted engine's stop: in %+v, want %+v", pid, m, from)
	}
	if c, _, _ := disk.GetIOPrio(pid); c == lane.IOIdle {
		t.Errorf("process %d after the stop: I/O class still idle", pid)
	}
}

// An exit reported for a process that lives on (the kernel reports the
// leader's exit when another thread execs, and the process goes on under
// its PID) keeps its record; a real exit drops it.
func TestForgetExitedKeepsLiveProcesses(t *testing.T) {
	e := testEngine(t)
	l := lane.Default().Lanes[lane.Background]
	child := testutil.StartChild(t, "sleep 30s")
	if _, err := e.Move([]int{child.PID()}, l, "test"); err != nil {
		t.Fatal(err)
	}
	if err := e.ForgetExited([]int{child.PID()}); err != nil {
		t.Fatal(err)
	}
	recs := mustRecords(t, e)
	if _, ok := recs[child.PID()]; !ok {
		t.Fatalf("the record of live process %d was dropped on an exit event", child.PID())
	}
	child.Cmd.Process.Kill()
	child.Cmd.Wait()
	if err := e.ForgetExited([]int{child.PID()}); err != nil {
		t.Fatal(err)
	}
	var rec ProcRecord
	if err := e.store.Get(state.KindProc, strconv.Itoa(child.PID()), &rec); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the record of exited process %d is still there: %+v, %v", child.PID(), rec, err)
	}
}

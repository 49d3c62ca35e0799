package enforce

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
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
	notes, err := g.Notes("p.")
	if err != nil {
		t.Fatal(err)
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
		var note ProcRecord
		if err := json.Unmarshal(notes[noteKey(pid)], &note); err != nil || note.StartTime != rec.StartTime {
			t.Errorf("second record of %d: %+v, %v", pid, note, err)
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
	if notes, _ := g.Notes("p."); notes[noteKey(pids[0])] != nil {
		t.Errorf("second record of exited %d kept", pids[0])
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

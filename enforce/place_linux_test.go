package enforce

import (
	"encoding/json"
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

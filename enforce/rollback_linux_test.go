package enforce

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/disk"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/lane"
)

// A move refused part way, after one requested tree (a shell and its
// child) has joined the lane and before the second PID does, puts the
// moved tree back: each process in the groups it came from, with its I/O
// priority, and no record left.
func TestPartlyMovedTreeRollsBack(t *testing.T) {
	e := testEngine(t)
	l := lane.Default().Lanes[lane.Background]
	a := startGroup(t, "sleep 60 & wait")
	b := startGroup(t, "exec sleep 60")
	var kid int
	for deadline := time.Now().Add(5 * time.Second); kid == 0; time.Sleep(10 * time.Millisecond) {
		if ds, _ := cgroup.Descendants(a.Process.Pid); len(ds) == 1 {
			kid = ds[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell started no child within 5 s")
		}
	}
	pids := []int{a.Process.Pid, kid, b.Process.Pid}
	type was struct {
		m     cgroup.Membership
		class lane.IOClass
		lvl   int
	}
	before := map[int]was{}
	for _, pid := range pids {
		m, err := cgroup.ProcMembership(pid)
		if err != nil {
			t.Fatal(err)
		}
		c, lvl, err := disk.GetIOPrio(pid)
		if err != nil {
			t.Fatal(err)
		}
		before[pid] = was{m, c, lvl}
	}
	if _, err := e.EnsureLane(l); err != nil {
		t.Fatal(err)
	}
	group := e.Group(l.Name).Name()
	inLane := func(pid int) bool {
		m, err := cgroup.ProcMembership(pid)
		return err == nil && (strings.HasSuffix(m.V2, "/"+group) || strings.HasSuffix(m.V1[cgroup.CPU], "/"+group))
	}
	refused := errors.New("refused: the second tree")
	sawMoved := false
	check := func(c Candidate) error {
		if c.PID == b.Process.Pid && inLane(a.Process.Pid) && inLane(kid) {
			sawMoved = true
			return refused
		}
		return nil
	}
	_, err := e.MoveChecked([]int{a.Process.Pid, b.Process.Pid}, l, "test", check)
	if !errors.Is(err, refused) {
		t.Fatalf("MoveChecked: %v, want the check's refusal", err)
	}
	if !sawMoved {
		t.Fatal("the check never saw the first tree in the lane: the move was not partial")
	}
	for _, pid := range pids {
		m, err := cgroup.ProcMembership(pid)
		if err != nil {
			t.Fatal(err)
		}
		w := before[pid]
		if m.V2 != w.m.V2 || m.V1[cgroup.CPU] != w.m.V1[cgroup.CPU] {
			t.Errorf("process %d after the rollback: %+v, want %+v", pid, m, w.m)
		}
		if c, lvl, err := disk.GetIOPrio(pid); err != nil || c != w.class || lvl != w.lvl {
			t.Errorf("process %d I/O priority after the rollback: %s/%d (%v), want %s/%d", pid, c, lvl, err, w.class, w.lvl)
		}
	}
	recs := mustRecords(t, e)
	for _, pid := range pids {
		if r, ok := recs[pid]; ok {
			t.Errorf("record of process %d left after the rollback: %+v", pid, r)
		}
	}
}

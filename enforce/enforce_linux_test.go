package enforce

import (
	"os"
	"strconv"
	"testing"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

func TestMain(m *testing.M) { testutil.ChildMain(m) }

// A child forked inside a lane goes back where its parent came from when
// the lane is released, however it came to be in the lane: forked after
// its parent joined but before the move reached it (the move then finds it
// already in the lane), or recorded with the lane as its origin by an
// older lanesd. Either way the lane's group is removed.
func TestReleaseReturnsChildrenForkedInside(t *testing.T) {
	testutil.RequireRoot(t)
	cases := []struct {
		name string
		// setup puts the forker and its child in the lane.
		setup func(t *testing.T, e *Engine, g cgroup.Group, l *lane.Lane, forker, child int)
	}{
		{"child forked between its parent's move and its own", func(t *testing.T, e *Engine, g cgroup.Group, l *lane.Lane, forker, child int) {
			// As if the child were forked after its parent joined: it
			// is in the group before Move reaches it.
			if err := g.AddProc(child); err != nil {
				t.Fatal(err)
			}
			moved, err := e.Move([]int{forker}, l, "test")
			if err != nil {
				t.Fatal(err)
			}
			if len(moved) != 2 {
				t.Fatalf("moved %v, want the forker and its child", moved)
			}
			var rec ProcRecord
			if err := e.store.Get(state.KindProc, strconv.Itoa(child), &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Orig.V2 == "/"+g.Name() || rec.Orig.V1[cgroup.CPU] == "/"+g.Name() {
				t.Errorf("child's recorded origin is the lane: %+v", rec.Orig)
			}
		}},
		{"record naming the lane as the origin", func(t *testing.T, e *Engine, g cgroup.Group, l *lane.Lane, forker, child int) {
			if _, err := e.Move([]int{forker}, l, "test"); err != nil {
				t.Fatal(err)
			}
			var rec ProcRecord
			if err := e.store.Get(state.KindProc, strconv.Itoa(child), &rec); err != nil {
				t.Fatal(err)
			}
			rec.Orig = cgroup.Membership{V2: "/" + g.Name(), V1: map[string]string{}}
			for c := range e.H.V1 {
				rec.Orig.V1[c] = "/" + g.Name()
			}
			if err := e.store.Put(state.KindProc, strconv.Itoa(child), rec); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store, err := state.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			prefix := testutil.UniqueName("lanes-t") + "-"
			e, err := New(Options{Store: store, GroupName: func(n string) string { return prefix + n }})
			if err != nil {
				t.Fatal(err)
			}
			l := lane.Default().Lanes[lane.Interactive]
			g, err := e.EnsureLane(l)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				// After the children are killed (cleanups run last first).
				if g.Exists() {
					pids, _ := g.Procs()
					root := cgroup.Membership{V2: "/", V1: map[string]string{cgroup.CPU: "/", "blkio": "/"}}
					for _, p := range pids {
						e.H.Restore(p, root)
					}
					g.Remove()
				}
			})
			before, err := cgroup.ProcMembership(os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			forker := testutil.StartChild(t, "forker 30s")
			child, err := strconv.Atoi(forker.Line(t))
			if err != nil {
				t.Fatal(err)
			}
			tc.setup(t, e, g, l, forker.PID(), child)
			if err := e.ReleaseLane(g.Name(), mustRecords(t, e)); err != nil {
				t.Fatalf("release: %v", err)
			}
			if g.Exists() {
				t.Errorf("group %s still exists", g.Name())
			}
			for _, pid := range []int{forker.PID(), child} {
				now, err := cgroup.ProcMembership(pid)
				if err != nil {
					t.Fatal(err)
				}
				if now.V2 != before.V2 || now.V1[cgroup.CPU] != before.V1[cgroup.CPU] {
					t.Errorf("process %d is in %+v after the release, want %+v (where the test runs)", pid, now, before)
				}
			}
		})
	}
}

func mustRecords(t *testing.T, e *Engine) map[int]ProcRecord {
	t.Helper()
	recs, err := e.Records()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

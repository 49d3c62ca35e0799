package enforce

import (
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// testEngine is an engine with a state store of its own and private group
// names, whose groups are emptied and removed at cleanup (after the
// test's processes are killed: register those cleanups later).
func testEngine(t *testing.T) *Engine {
	t.Helper()
	testutil.RequireRoot(t)
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
	t.Cleanup(func() {
		for _, name := range []string{lane.Interactive, lane.Normal, lane.Background} {
			g := e.Group(name)
			if !g.Exists() {
				continue
			}
			if err := e.ReleaseLane(g.Name(), mustRecords(t, e)); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return e
}

// startGroup starts a shell command in a process group of its own, killed
// (the whole group) at cleanup.
func startGroup(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	c := exec.Command("sh", "-c", script)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		c.Wait()
	})
	return c
}

// A tree whose members come and go while it moves: a shell forking
// short-lived children in a tight loop, moved back and forth between two
// lanes. A child that exits during a move (its /proc files then answer
// ESRCH or ENOENT, its cgroup write is ignored) is skipped, never a
// failure of the move.
func TestMoveTreeWithExitingChildren(t *testing.T) {
	e := testEngine(t)
	cfg := lane.Default()
	lanes := []*lane.Lane{cfg.Lanes[lane.Interactive], cfg.Lanes[lane.Background]}
	sh := startGroup(t, "while :; do true & true & true & wait; done")
	const rounds = 1000
	// Under emulation a fork costs many times what it does natively: a
	// minute there is enough moves to race the forks (the check below)
	// and keeps the kernel matrix's guests within their time limit.
	limit := 3 * time.Minute
	if testutil.Emulated() {
		limit = time.Minute
	}
	deadline := time.Now().Add(limit)
	failures, done, children := 0, 0, 0
	for i := 0; i < rounds && time.Now().Before(deadline); i++ {
		moved, err := e.Move([]int{sh.Process.Pid}, lanes[i%2], "test")
		done++
		if err != nil {
			failures++
			if failures <= 5 {
				t.Errorf("move %d: %v", i, err)
			}
			continue
		}
		children += len(moved) - 1
		if moved[0] != sh.Process.Pid {
			t.Fatalf("move %d moved %v, not the shell first", i, moved)
		}
	}
	if failures > 0 {
		t.Errorf("%d of %d moves failed", failures, done)
	}
	// The count within the time limit is a timing assertion: under
	// emulation (the kernel matrix, TCG) a fork costs many times what it
	// does natively, so there the test asks only for enough moves to
	// have raced the forks.
	switch {
	case done < rounds && !testutil.Emulated():
		t.Errorf("only %d of %d moves within the time limit", done, rounds)
	case done < rounds/10:
		t.Errorf("only %d of %d moves within the time limit under emulation", done, rounds)
	}
	t.Logf("%d moves, %d failures, %d children moved along", done, failures, children)
	if children == 0 {
		t.Errorf("no child was ever moved along: the test did not race the forks")
	}
}

// The requested PIDs themselves must exist when the move starts.
func TestMoveGonePID(t *testing.T) {
	e := testEngine(t)
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	_, err := e.Move([]int{c.Process.Pid}, lane.Default().Lanes[lane.Background], "test")
	if !isGone(err) {
		t.Fatalf("move of an exited process: %v, want a no-process error", err)
	}
}

// Forget drops the record of a process that has exited (or whose PID is
// now another process's) and keeps that of a live one.
func TestForget(t *testing.T) {
	e := testEngine(t)
	l := lane.Default().Lanes[lane.Background]
	live := startGroup(t, "sleep 60")
	dead := startGroup(t, "sleep 60")
	reused := startGroup(t, "sleep 60")
	if _, err := e.Move([]int{live.Process.Pid, dead.Process.Pid, reused.Process.Pid}, l, "test"); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(-dead.Process.Pid, syscall.SIGKILL)
	dead.Wait()
	// As if reused's PID had been given to a new process: another start time.
	key := strconv.Itoa(reused.Process.Pid)
	var rec ProcRecord
	if err := e.store.Get(state.KindProc, key, &rec); err != nil {
		t.Fatal(err)
	}
	rec.StartTime++
	if err := e.store.Put(state.KindProc, key, rec); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pid  int
		kept bool
	}{
		{"live process", live.Process.Pid, true},
		{"exited process", dead.Process.Pid, false},
		{"PID reused", reused.Process.Pid, false},
		{"never recorded", 4194304, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.Forget(tc.pid); err != nil {
				t.Fatal(err)
			}
			err := e.store.Get(state.KindProc, strconv.Itoa(tc.pid), &ProcRecord{})
			if kept := err == nil; kept != tc.kept {
				t.Errorf("record kept: %v, want %v (%v)", kept, tc.kept, err)
			}
		})
	}
}

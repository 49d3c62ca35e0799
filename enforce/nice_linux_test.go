package enforce

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/state"
)

// Boost, Unboost and RestoreBoosts on a real process: every thread is
// reached, a thread's own priority is never lowered, the own values come
// back from the record — also to a process whose boost an earlier engine
// (a crashed lanesd) left — and a record whose PID was reused touches
// nothing.
func TestBoostRecords(t *testing.T) {
	e := testEngine(t)
	c := exec.Command("nice", "-n", "3", "sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	pid := c.Process.Pid
	for i := 0; i < 200; i++ { // until nice has set 3 and exec'd sleep
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); string(b) == "sleep\n" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	nice := func() int {
		t.Helper()
		n, err := cpu.ThreadNice(pid)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := nice(); n != 3 {
		t.Fatalf("started at nice %d, want 3", n)
	}
	for _, c := range []struct{ boost, want int }{{-5, -5}, {-2, -2}, {10, 3}} {
		if err := e.Boost(pid, c.boost, "sync"); err != nil {
			t.Fatal(err)
		}
		if n := nice(); n != c.want {
			t.Errorf("boost %d: nice %d, want %d (never above its own 3)", c.boost, n, c.want)
		}
	}
	var rec NiceRecord
	if err := e.store.Get(state.KindNice, strconv.Itoa(pid), &rec); err != nil || rec.Threads[pid] != 3 || rec.Lane != "sync" {
		t.Fatalf("record %+v, %v: want thread %d's own nice 3", rec, err, pid)
	}
	if err := e.Unboost(pid); err != nil {
		t.Fatal(err)
	}
	if n := nice(); n != 3 {
		t.Errorf("after Unboost nice %d, want its own 3", n)
	}
	if err := e.Unboost(pid); err != nil {
		t.Errorf("Unboost of a process not boosted: %v", err)
	}

	// A boost left by an earlier engine on the same store.
	if err := e.Boost(pid, -7, "sync"); err != nil {
		t.Fatal(err)
	}
	again, err := New(Options{Store: e.store, GroupName: e.groupName})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := again.RestoreBoosts(); err != nil || n != 1 {
		t.Fatalf("RestoreBoosts: %d, %v; want 1 process", n, err)
	}
	if n := nice(); n != 3 {
		t.Errorf("after RestoreBoosts nice %d, want its own 3", n)
	}
	if recs, _ := e.store.List(state.KindNice); len(recs) != 0 {
		t.Errorf("%d boost records left", len(recs))
	}

	// A reused PID: the record's start time is not the process's.
	if err := e.Boost(pid, -4, "sync"); err != nil {
		t.Fatal(err)
	}
	e.store.Get(state.KindNice, strconv.Itoa(pid), &rec)
	rec.StartTime++
	rec.Threads[pid] = 12
	e.store.Put(state.KindNice, strconv.Itoa(pid), rec)
	if _, err := e.RestoreBoosts(); err != nil {
		t.Fatal(err)
	}
	if n := nice(); n != -4 {
		t.Errorf("a record of another process (reused PID) changed nice to %d", n)
	}
}

// Every thread of a process is boosted and given back: this test's own
// process, whose Go runtime runs several threads.
func TestBoostEveryThread(t *testing.T) {
	e := testEngine(t)
	pid := os.Getpid()
	tids, err := procfs.Threads(pid)
	if err != nil || len(tids) < 2 {
		t.Fatalf("threads %v, %v: want several", tids, err)
	}
	check := func(want int, when string) {
		t.Helper()
		for _, tid := range tids {
			if n, err := cpu.ThreadNice(tid); err == nil && n != want {
				t.Errorf("%s: thread %d at nice %d, want %d", when, tid, n, want)
			}
		}
	}
	check(0, "before")
	if err := e.Boost(pid, -3, "sync"); err != nil {
		t.Fatal(err)
	}
	check(-3, "boosted")
	if err := e.Unboost(pid); err != nil {
		t.Fatal(err)
	}
	check(0, "given back")
}

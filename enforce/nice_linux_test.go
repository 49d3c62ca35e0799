package enforce

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/internal/testutil"
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
		if err := e.Boost(pid, c.boost, 0, "sync"); err != nil {
			t.Fatal(err)
		}
		if n := nice(); n != c.want {
			t.Errorf("boost %d: nice %d, want %d (never above its own 3)", c.boost, n, c.want)
		}
	}
	var rec NiceRecord
	if err := e.store.Get(state.KindNice, strconv.Itoa(pid), &rec); err != nil || rec.Threads[pid].Nice != 3 || rec.Threads[pid].Slice != nil || rec.Lane != "sync" {
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
	if err := e.Boost(pid, -7, 0, "sync"); err != nil {
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
	if err := e.Boost(pid, -4, 0, "sync"); err != nil {
		t.Fatal(err)
	}
	e.store.Get(state.KindNice, strconv.Itoa(pid), &rec)
	rec.StartTime++
	rec.Threads[pid] = OwnFair{Nice: 12}
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
	if err := e.Boost(pid, -3, 0, "sync"); err != nil {
		t.Fatal(err)
	}
	check(-3, "boosted")
	if err := e.Unboost(pid); err != nil {
		t.Fatal(err)
	}
	check(0, "given back")
}

// A boost with a slice gives each thread that EEVDF slice beside its nice
// and gives back what the thread had: the kernel's default, or a slice of
// its own; a boost that starts without a slice and gains one records the
// slice then; a nice-only record of an earlier lanesd (a bare number per
// thread) is still given back.
func TestBoostSlice(t *testing.T) {
	e := testEngine(t)
	testutil.RequireFeature(t, "EEVDF custom slice", func() error { _, err := cpu.DefaultSlice(); return err })
	def, _ := cpu.DefaultSlice()
	const boostSlice = 200 * time.Microsecond
	for _, tc := range []struct {
		name      string
		own       time.Duration // 0: the default
		firstBare bool          // a boost without a slice first
	}{
		{"default slice", 0, false},
		{"own slice", 3 * time.Millisecond, false},
		{"slice added to a running boost", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := exec.Command("sleep", "30")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Process.Kill(); c.Wait() })
			pid := c.Process.Pid
			if tc.own != 0 {
				if err := cpu.SetThreadNiceSlice(pid, 0, tc.own); err != nil {
					t.Fatal(err)
				}
			}
			read := func() (int, time.Duration) {
				t.Helper()
				attr, err := unix.SchedGetAttr(pid, 0)
				if err != nil {
					t.Fatal(err)
				}
				return int(attr.Nice), time.Duration(attr.Runtime)
			}
			wantOwn := tc.own
			if wantOwn == 0 {
				wantOwn = def
			}
			if _, s := read(); s != wantOwn {
				t.Fatalf("slice %v before the boost, want %v", s, wantOwn)
			}
			if tc.firstBare {
				if err := e.Boost(pid, -2, 0, "sync"); err != nil {
					t.Fatal(err)
				}
				if n, s := read(); n != -2 || s != wantOwn {
					t.Fatalf("boost without a slice: nice %d slice %v, want -2 and %v", n, s, wantOwn)
				}
			}
			if err := e.Boost(pid, -5, boostSlice, "sync"); err != nil {
				t.Fatal(err)
			}
			if n, s := read(); n != -5 || s != boostSlice {
				t.Errorf("boosted: nice %d slice %v, want -5 and %v", n, s, boostSlice)
			}
			var rec NiceRecord
			if err := e.store.Get(state.KindNice, strconv.Itoa(pid), &rec); err != nil {
				t.Fatal(err)
			}
			if own := rec.Threads[pid]; own.Nice != 0 || own.Slice == nil || *own.Slice != tc.own {
				t.Errorf("record %+v: want nice 0 and slice %v (0: the default)", own, tc.own)
			}
			if err := e.Unboost(pid); err != nil {
				t.Fatal(err)
			}
			if n, s := read(); n != 0 || s != wantOwn {
				t.Errorf("given back: nice %d slice %v, want 0 and %v", n, s, wantOwn)
			}
		})
	}

	t.Run("nice-only record of an earlier lanesd", func(t *testing.T) {
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		pid := c.Process.Pid
		st, err := procfs.ReadStat(pid)
		if err != nil {
			t.Fatal(err)
		}
		if err := cpu.SetThreadNice(pid, -6); err != nil {
			t.Fatal(err)
		}
		old := fmt.Sprintf(`{"pid":%d,"start_time":%d,"lane":"sync","threads":{"%d":0}}`, pid, st.StartTime, pid)
		if err := e.store.PutMany([]state.Entry{{Kind: state.KindNice, Key: strconv.Itoa(pid), JSON: []byte(old)}}); err != nil {
			t.Fatal(err)
		}
		if n, err := e.RestoreBoosts(); err != nil || n != 1 {
			t.Fatalf("RestoreBoosts: %d, %v; want 1", n, err)
		}
		if n, _ := cpu.ThreadNice(pid); n != 0 {
			t.Errorf("nice %d after restoring an old record, want 0", n)
		}
	})
}

// The boost policy's slice bounds are the kernel's, as cpu sets them.
func TestBoostSliceBounds(t *testing.T) {
	e := testEngine(t)
	for _, s := range []time.Duration{-time.Microsecond, 99 * time.Microsecond, 101 * time.Millisecond} {
		if err := e.Boost(os.Getpid(), -1, s, "sync"); err == nil {
			t.Errorf("Boost with slice %v: no error", s)
		}
	}
	if recs, _ := e.store.List(state.KindNice); len(recs) != 0 {
		t.Errorf("a refused boost left %d records", len(recs))
	}
}

// newThread starts an OS thread in this process that did not exist among
// before, and returns its id and a function that ends it. A goroutine
// locked to a thread holds it, so locking goroutines one after another
// uses up the runtime's idle threads and then makes it start one, from a
// thread of this process.
func newThread(t *testing.T, before []int) (int, func()) {
	t.Helper()
	old := map[int]bool{}
	for _, tid := range before {
		old[tid] = true
	}
	var quits []chan struct{}
	release := func() {
		for _, q := range quits {
			close(q)
		}
	}
	for range 64 {
		tidc, quit := make(chan int), make(chan struct{})
		quits = append(quits, quit)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			tidc <- unix.Gettid()
			<-quit
		}()
		if tid := <-tidc; !old[tid] {
			return tid, release
		}
	}
	release()
	t.Fatal("no new thread after 64 locked goroutines")
	return 0, nil
}

// A thread the process starts after its boost inherits the boost (nice
// and slice are copied on clone); it gets the process's own values back
// at Unboost, whether or not a later Boost recorded it.
func TestBoostInheritedThreads(t *testing.T) {
	e := testEngine(t)
	pid := os.Getpid()
	def, err := cpu.DefaultSlice()
	sliceOK := err == nil // else nice alone
	var slice time.Duration
	if sliceOK {
		slice = 300 * time.Microsecond
	}
	for _, reboost := range []bool{false, true} {
		tids, err := procfs.Threads(pid)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Boost(pid, -3, slice, "sync"); err != nil {
			t.Fatal(err)
		}
		tid, release := newThread(t, tids)
		if n, _ := cpu.ThreadNice(tid); n != -3 {
			release()
			t.Fatalf("a thread started after the boost is at nice %d, want -3 (inherited)", n)
		}
		if reboost { // a later level records the new thread
			if err := e.Boost(pid, -4, slice, "sync"); err != nil {
				release()
				t.Fatal(err)
			}
			var rec NiceRecord
			if err := e.store.Get(state.KindNice, strconv.Itoa(pid), &rec); err != nil || rec.Threads[tid].Nice != 0 {
				release()
				t.Fatalf("record of the new thread %+v, %v: want its own nice 0, not the inherited boost", rec.Threads[tid], err)
			}
		}
		if err := e.Unboost(pid); err != nil {
			release()
			t.Fatal(err)
		}
		n, _ := cpu.ThreadNice(tid)
		attr, _ := unix.SchedGetAttr(tid, 0)
		release()
		if n != 0 {
			t.Errorf("reboost %v: the new thread at nice %d after Unboost, want 0", reboost, n)
		}
		if sliceOK && time.Duration(attr.Runtime) != def {
			t.Errorf("reboost %v: the new thread's slice %v after Unboost, want the default %v", reboost, time.Duration(attr.Runtime), def)
		}
	}
}

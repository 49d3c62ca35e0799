package enforce

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/state"
)

// Reserve, Unreserve and RestoreReserves on a real process: the thread
// goes under SCHED_DEADLINE with the runtime asked (and a new one when
// it changes), its own policy and nice come back from the record — also
// after an earlier engine (a crashed lanesd) left it — and a thread under
// a real-time policy of its own is left alone.
func TestReserveRecords(t *testing.T) {
	e := testEngine(t)
	c := exec.Command("nice", "-n", "4", "sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	pid := c.Process.Pid
	waitExec(t, pid, "sleep")
	sched := func() cpu.ThreadSched {
		t.Helper()
		s, err := cpu.GetThreadSched(pid)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	own := sched()
	if own.Policy != 0 || own.Nice != 4 {
		t.Fatalf("started as %+v, want SCHED_OTHER at nice 4", own)
	}
	for i, rt := range []time.Duration{500 * time.Microsecond, 200 * time.Microsecond} {
		err := e.Reserve(pid, map[int]time.Duration{pid: rt}, 10*time.Millisecond, "rsv")
		if i == 0 && errors.Is(err, unix.EBUSY) {
			// Deadline bandwidth is global (other tasks, or a kernel's
			// leak, may hold it): nothing of lanes' to test then.
			t.Skipf("no room in the kernel's deadline admission control: %v", err)
		}
		if err != nil {
			t.Fatalf("Reserve %v: %v", rt, err)
		}
		if s := sched(); s.Policy != cpu.SchedDeadline {
			t.Fatalf("after Reserve the policy is %d, want SCHED_DEADLINE", s.Policy)
		}
		if got, err := cpu.DeadlineRuntime(pid); err != nil || got != rt {
			t.Errorf("deadline runtime %v, %v; want %v", got, err, rt)
		}
	}
	var rec SchedRecord
	if err := e.store.Get(state.KindSched, strconv.Itoa(pid), &rec); err != nil || rec.Threads[pid] != own || rec.Lane != "rsv" {
		t.Fatalf("record %+v, %v: want thread %d's own %+v", rec, err, pid, own)
	}
	if !e.Reserved(pid) {
		t.Error("Reserved: false for a reserved process")
	}
	if err := e.Unreserve(pid); err != nil {
		t.Fatal(err)
	}
	if s := sched(); s != own {
		t.Errorf("after Unreserve %+v, want its own %+v", s, own)
	}
	if e.Reserved(pid) {
		t.Error("Reserved: true after Unreserve")
	}

	// A reservation an earlier engine left, given back by the next.
	if err := e.Reserve(pid, map[int]time.Duration{pid: 200 * time.Microsecond}, 10*time.Millisecond, "rsv"); err != nil {
		t.Fatal(err)
	}
	again, err := New(Options{Store: e.store, GroupName: e.groupName})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := again.RestoreReserves(); err != nil || n != 1 {
		t.Fatalf("RestoreReserves: %d, %v; want 1 process", n, err)
	}
	if s := sched(); s != own {
		t.Errorf("after RestoreReserves %+v, want its own %+v", s, own)
	}

	// A real-time thread of its own is not lanes' to change.
	rt := exec.Command("chrt", "-f", "1", "sleep", "30")
	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Process.Kill(); rt.Wait() })
	// chrt sets its policy and then execs: once the process is sleep it
	// is under SCHED_FIFO (a fixed wait was too short under emulation).
	waitExec(t, rt.Process.Pid, "sleep")
	if err := e.Reserve(rt.Process.Pid, map[int]time.Duration{rt.Process.Pid: time.Millisecond}, 10*time.Millisecond, "rsv"); err != nil {
		t.Fatal(err)
	}
	if s, _ := cpu.GetThreadSched(rt.Process.Pid); s.Policy != 1 {
		t.Errorf("a SCHED_FIFO thread was changed to policy %d", s.Policy)
	}
}

// waitExec waits until process pid runs comm (a wrapper such as nice or
// chrt has set the process up and exec'd it), at most 10 s.
func waitExec(t *testing.T, pid int, comm string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); string(b) == comm+"\n" {
			return
		}
	}
	t.Fatalf("process %d does not run %s after 10 s", pid, comm)
}

// A record whose threads could not be given back stays for the next try:
// Unreserve fails and keeps it, and RestoreReserves, once the thread can
// take its scheduling back, gives it back and drops it. (The kernel's
// refusal is made here with a recorded policy it does not know.)
func TestReserveRecordKeptOnFailure(t *testing.T) {
	e := testEngine(t)
	c := exec.Command("sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	pid := c.Process.Pid
	waitExec(t, pid, "sleep")
	if err := e.Reserve(pid, map[int]time.Duration{pid: 200 * time.Microsecond}, 10*time.Millisecond, "rsv"); err != nil {
		if errors.Is(err, unix.EBUSY) {
			t.Skipf("no room in the kernel's deadline admission control: %v", err)
		}
		t.Fatal(err)
	}
	key := strconv.Itoa(pid)
	var rec SchedRecord
	if err := e.store.Get(state.KindSched, key, &rec); err != nil {
		t.Fatal(err)
	}
	own := rec.Threads[pid]
	rec.Threads[pid] = cpu.ThreadSched{Policy: 77}
	if err := e.store.Put(state.KindSched, key, rec); err != nil {
		t.Fatal(err)
	}
	if err := e.Unreserve(pid); err == nil {
		t.Fatal("Unreserve with a policy the kernel refuses: no error")
	}
	if !e.Reserved(pid) {
		t.Fatal("the record was dropped although the thread kept SCHED_DEADLINE")
	}
	if n, err := e.RestoreReserves(); err == nil || n != 0 || !e.Reserved(pid) {
		t.Fatalf("RestoreReserves of the refused record: %d, %v, kept %v; want an error and the record kept", n, err, e.Reserved(pid))
	}
	rec.Threads[pid] = own
	if err := e.store.Put(state.KindSched, key, rec); err != nil {
		t.Fatal(err)
	}
	if n, err := e.RestoreReserves(); err != nil || n != 1 || e.Reserved(pid) {
		t.Fatalf("RestoreReserves: %d, %v, kept %v; want 1 and the record gone", n, err, e.Reserved(pid))
	}
	if s, _ := cpu.GetThreadSched(pid); s != own {
		t.Errorf("after RestoreReserves %+v, want its own %+v", s, own)
	}
}

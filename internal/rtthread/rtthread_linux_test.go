package rtthread

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// Run's thread has the policy asked for, sleeps to the time given (not
// before it), and returns fn's error.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		priority int
		policy   int
	}{
		{"own policy", 0, unix.SCHED_NORMAL},
		{"SCHED_FIFO", 10, unix.SCHED_FIFO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.priority > 0 {
				testutil.RequireRoot(t)
			}
			boom := errors.New("boom")
			err := Run(tc.priority, func(sleepUntil func(time.Time)) error {
				attr, err := unix.SchedGetAttr(0, 0) // (fn runs on Run's thread, not the test's: no t.Fatal)
				if err != nil {
					return err
				}
				if int(attr.Policy) != tc.policy || int(attr.Priority) != tc.priority {
					t.Errorf("thread policy %d priority %d, want %d and %d", attr.Policy, attr.Priority, tc.policy, tc.priority)
				}
				at := time.Now().Add(20 * time.Millisecond)
				sleepUntil(at)
				if early := time.Until(at); early > 0 {
					t.Errorf("woke %v before the time given", early)
				}
				return boom
			})
			if !errors.Is(err, boom) {
				t.Errorf("Run: %v, want fn's error", err)
			}
		})
	}
}

// A thread Run gave SCHED_FIFO and a CPU ends with fn; where that thread
// was the process's main thread, which cannot end, its policy and CPUs
// are put back. Go runs goroutines on the main thread too, so of many
// runs some land there.
func TestRunLeavesNoPolicy(t *testing.T) {
	testutil.RequireRoot(t)
	var own unix.CPUSet
	if err := unix.SchedGetaffinity(0, &own); err != nil {
		t.Fatal(err)
	}
	last := -1
	for c := range 1024 {
		if own.IsSet(c) {
			last = c
		}
	}
	onMain := 0
	for range 200 {
		err := Run(10, func(sleepUntil func(time.Time)) error {
			if unix.Gettid() == unix.Getpid() {
				onMain++
			}
			var set unix.CPUSet
			set.Set(last)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				return err
			}
			sleepUntil(time.Now().Add(100 * time.Microsecond))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of 200 runs on the main thread", onMain)
	pid := unix.Getpid()
	attr, err := unix.SchedGetAttr(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		t.Fatal(err)
	}
	if attr.Policy != unix.SCHED_NORMAL || set != own {
		t.Errorf("main thread after the runs: policy %d on %d CPUs, want %d on its %d", attr.Policy, set.Count(), unix.SCHED_NORMAL, own.Count())
	}
}

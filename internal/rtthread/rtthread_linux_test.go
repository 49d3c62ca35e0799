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

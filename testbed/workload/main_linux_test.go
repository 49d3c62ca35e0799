//go:build linux

package workload

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/lanes-qos/lanes/testbed/netns"
)

// TestMain holds the host's testbed lock, so that benchmark runs and the
// other testbed packages' tests (run in parallel by go test) do not
// disturb the figures these tests check. Without root there is no lock to
// take; the privileged tests then fail or skip on their own.
//
// With LANES_TEST_GEN set the test binary is a generator process
// (Env.Gen): it runs GenMain on its last argument, as `lanes bench gen`
// does.
func TestMain(m *testing.M) {
	if os.Getenv("LANES_TEST_GEN") != "" {
		if err := GenMain(context.Background(), os.Args[len(os.Args)-1], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Geteuid() == 0 {
		unlock, err := netns.LockHost(context.Background(), func() {
			fmt.Fprintln(os.Stderr, "waiting for the testbed lock", netns.LockPath)
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		code := m.Run()
		unlock()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

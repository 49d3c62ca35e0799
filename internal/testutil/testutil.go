package testutil

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
)

// RequireRoot fails the test unless it runs as root, except when
// LANES_UNPRIVILEGED_TESTS=1 says this run is deliberately unprivileged, in
// which case it skips. Privileged tests must not pass silently as non-root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("LANES_UNPRIVILEGED_TESTS") == "1" {
		tb.Skip("needs root (LANES_UNPRIVILEGED_TESTS=1)")
	}
	tb.Fatal("this test needs root: run the tests as root, or set LANES_UNPRIVILEGED_TESTS=1 to skip privileged tests")
}

var seq atomic.Int64

// UniqueName returns a name unique to this test process, e.g. for cgroups
// or namespaces: prefix-<pid>-<n>. Kept short (network device names are
// limited to 15 bytes).
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s%d%d", prefix, os.Getpid()%100000, seq.Add(1))
}

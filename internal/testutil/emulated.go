package testutil

import (
	"os"
	"testing"
)

// EmulatedEnv is the environment variable the VM lane (internal/vmlane)
// sets to 1 inside its QEMU guests, where the CPU is emulated (TCG) and
// every timing is several times slower than on real hardware.
const EmulatedEnv = "LANES_EMULATED"

// Emulated reports whether the tests run under CPU emulation
// (LANES_EMULATED=1), where only functional checks are meaningful.
func Emulated() bool { return os.Getenv(EmulatedEnv) == "1" }

// RequireTiming skips the test under emulation. Call it right before a
// timing- or throughput-sensitive assertion (ratios, latencies, rates);
// the functional part of a test should run before it.
func RequireTiming(tb testing.TB) {
	tb.Helper()
	if Emulated() {
		tb.Skip("timing-sensitive assertion not made under emulation")
	}
}

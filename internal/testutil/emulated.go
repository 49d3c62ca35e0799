package testutil

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// EmulatedEnv is the environment variable the VM lane (internal/vmlane)
// sets to 1 inside its QEMU guests, where the CPU is emulated (TCG) and
// every timing is several times slower than on real hardware.
const EmulatedEnv = "LANES_EMULATED"

// Emulated reports whether the tests run under CPU emulation
// (LANES_EMULATED=1), where only functional checks are meaningful.
func Emulated() bool { return os.Getenv(EmulatedEnv) == "1" }

// untimed says why no timing this binary measures can measure the code,
// or "": under CPU emulation, or built with the race detector, which
// slows memory accesses and synchronisation several times over (CI's
// race pass looks for data races; its plain pass makes the timing
// assertions).
func untimed() string {
	switch {
	case Emulated():
		return "under emulation"
	case raceEnabled:
		return "under the race detector"
	}
	return ""
}

// RequireTiming skips the test under emulation or the race detector
// (untimed), and on a host too loaded
// for its timings to measure the code (HostLoad: CPU pressure, load
// average, a thread's wake-up lateness), saying what it measured. Call it
// right before a timing- or throughput-sensitive assertion (ratios,
// latencies, rates); the functional part of a test should run before it.
func RequireTiming(tb testing.TB) {
	tb.Helper()
	if why := untimed(); why != "" {
		tb.Skip("timing-sensitive assertion not made " + why)
	}
	h, err := ReadHostLoad()
	if err != nil {
		tb.Fatalf("measure this host's load: %v", err)
	}
	if why := h.tooLoaded(); why != "" {
		tb.Skipf("timing-sensitive assertion not made: host too loaded right now: %s (%v)", why, h)
	}
	tb.Logf("host load: %v", h)
}

// RequireTimingWithin is RequireTiming for an assertion bounded at about
// bound: it also skips when the host's normal-priority threads wake later
// than bound at p99 right now, since a wake-up that late is what such an
// assertion would measure.
func RequireTimingWithin(tb testing.TB, bound time.Duration) {
	tb.Helper()
	if why := untimed(); why != "" {
		tb.Skip("timing-sensitive assertion not made " + why)
	}
	h, err := ReadHostLoad()
	if err != nil {
		tb.Fatalf("measure this host's load: %v", err)
	}
	why := h.tooLoaded()
	if why == "" && h.WakeP99 > bound {
		why = fmt.Sprintf("threads wake %v late at p99, more than the %v the assertion bounds", h.WakeP99.Round(10*time.Microsecond), bound)
	}
	if why != "" {
		tb.Skipf("timing-sensitive assertion not made: host too loaded right now: %s (%v)", why, h)
	}
	tb.Logf("host load: %v", h)
}

// TimingOK says whether this host can measure timings now, as
// RequireTiming does, without skipping: for a test that loads the host
// itself (its own CPU hogs would fail RequireTiming) and so asks before
// it starts; it logs why not.
func TimingOK(tb testing.TB) bool {
	tb.Helper()
	if why := untimed(); why != "" {
		tb.Log("timing-sensitive assertions not made " + why)
		return false
	}
	h, err := ReadHostLoad()
	if err != nil {
		tb.Fatalf("measure this host's load: %v", err)
	}
	if why := h.tooLoaded(); why != "" {
		tb.Logf("timing-sensitive assertions not made: host too loaded at the start: %s (%v)", why, h)
		return false
	}
	tb.Logf("host load at the start: %v", h)
	return true
}

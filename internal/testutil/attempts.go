package testutil

import (
	"testing"
)

// Attempts runs a measurement up to n times, until one meets all its bars.
// measure makes try number try (1-based) and returns what it missed, one
// message per bar; none means it met them all. The misses of every try but
// the last are logged; those of the last fail the test.
//
// It is for throughput and latency bars that a disturbed host (a CPU
// stolen by the hypervisor, a neighbour's burst) can spoil for one run
// while the code under test is right: a real defect misses every try. A
// functional check (a counter that must move, a packet in the right
// class) does not belong in measure: it fails on its first miss.
func Attempts(tb testing.TB, n int, measure func(try int) []string) {
	tb.Helper()
	if n < 1 {
		n = 1
	}
	for try := 1; ; try++ {
		misses := measure(try)
		if len(misses) == 0 {
			if try > 1 {
				tb.Logf("try %d of %d met every bar", try, n)
			}
			return
		}
		if try == n {
			for _, m := range misses {
				tb.Error(m)
			}
			return
		}
		for _, m := range misses {
			tb.Logf("try %d of %d missed: %s", try, n, m)
		}
	}
}

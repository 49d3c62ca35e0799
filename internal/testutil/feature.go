package testutil

import (
	"errors"
	"testing"
)

// MissingFeaturePrefix starts the skip message of RequireFeature. The VM
// lane (internal/vmlane) looks for it and fails a skip for a feature that
// the kernel's config says is there.
const MissingFeaturePrefix = "missing kernel feature: "

// RequireFeature runs probe and skips the test when it answers that the
// kernel conclusively lacks the feature (an error wrapping
// errors.ErrUnsupported), with the message "missing kernel feature: <name>".
// Any other error is inconclusive and fails the test: a probe that could
// not run must not turn into a silent skip.
//
// Use the names of the VM lane's feature table where one fits (e.g.
// "qdisc fq_codel", "qdisc netem", "bpf qdisc", "sched_ext", "ifb",
// "cgroup v2 cpu controller"), so the skip can be checked against the
// kernel's config.
func RequireFeature(tb testing.TB, name string, probe func() error) {
	tb.Helper()
	err := probe()
	switch {
	case err == nil:
		return
	case errors.Is(err, errors.ErrUnsupported):
		tb.Skipf("%s%s (%v)", MissingFeaturePrefix, name, err)
	default:
		tb.Fatalf("probe for kernel feature %s is inconclusive: %v", name, err)
	}
}

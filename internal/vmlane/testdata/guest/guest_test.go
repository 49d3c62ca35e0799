// Package guest holds the tests that internal/vmlane's boot test runs
// inside a VM: they check the environment the guest promises and make
// one of each outcome the runner must report.
package guest

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestEnvironment checks what the guest init promises the tests.
func TestEnvironment(t *testing.T) {
	testutil.RequireRoot(t)
	if !testutil.Emulated() {
		t.Fatal("LANES_EMULATED is not 1 in the guest")
	}
	ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"cpu", "io", "memory", "pids"} {
		if !slices.Contains(strings.Fields(string(ctl)), c) {
			t.Errorf("controller %s not delegated: %q", c, ctl)
		}
	}
	if _, err := os.Stat("/sys/fs/bpf"); err != nil {
		t.Error(err)
	}
	if data, err := os.ReadFile("testdata/marker.txt"); err != nil || strings.TrimSpace(string(data)) != "vmlane testdata" {
		t.Errorf("testdata not next to the binary: %q %v", data, err)
	}
	for _, args := range [][]string{
		{"ip", "netns", "add", "vmlane0"},
		{"ip", "netns", "exec", "vmlane0", "ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1"},
		{"ip", "netns", "exec", "vmlane0", "tc", "qdisc", "add", "dev", "v0", "root", "handle", "1:", "htb"},
		{"ip", "netns", "del", "vmlane0"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%v: %v: %s", args, err, out)
		}
	}
}

// TestOutcome makes the outcome the boot test asks for through
// VMLANE_SELFTEST: "fail", "skip-fq_codel" (a missing-feature skip) or
// nothing (pass).
func TestOutcome(t *testing.T) {
	switch os.Getenv("VMLANE_SELFTEST") {
	case "fail":
		t.Fatal("deliberate failure")
	case "skip-fq_codel":
		testutil.RequireFeature(t, "qdisc fq_codel", func() error { return errors.ErrUnsupported })
	}
	testutil.RequireTiming(t)
}

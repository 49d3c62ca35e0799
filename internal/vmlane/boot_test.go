package vmlane

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestBootBookworm boots the real bookworm kernel under QEMU with the
// tests in testdata/guest and checks, per asked-for outcome, what the
// runner reports: a pass, a failure with the guest's exit status passed
// through, and a "missing kernel feature" skip that the kernel's config
// contradicts (fq_codel is built into bookworm's kernel).
func TestBootBookworm(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal(ErrNoQEMU)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root, err := ModuleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := ListPackages(ctx, root, []string{"./internal/vmlane/testdata/guest"})
	if err != nil || len(pkgs) != 1 {
		t.Fatalf("list guest package: %v %v", pkgs, err)
	}
	cache := "/var/cache/lanes-vmlane" // shared with lanes-vmlane: downloads stay warm
	bins, failed, err := BuildTests(ctx, root, pkgs, t.TempDir())
	if err != nil || len(failed) > 0 {
		t.Fatalf("build guest tests: %v %v", failed, err)
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("busybox not found: run `lanes-vmlane --install`")
	}
	kernel, err := Resolve(ctx, Specs["bookworm"], SystemMirrors("/etc/apt"), cache, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		append       string
		outcome      Outcome // of TestOutcome
		guestRC      string
		wantFailures []string // substrings, one per expected failure
	}{
		{"pass", "", Skip, "0", nil},
		{"fail", "VMLANE_SELFTEST=fail", Fail, "1", []string{"exit status 1", "FAIL: deliberate failure", "guest exit status 1"}},
		{"contradicted skip", "VMLANE_SELFTEST=skip-fq_codel", Skip, "0", []string{`skipped for missing "qdisc fq_codel" but the kernel has it: CONFIG_NET_SCH_FQ_CODEL=y`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			consoles := t.TempDir()
			o := Options{
				ConsoleDir: consoles,
				Kernels:    []string{"bookworm"}, Cache: cache, Root: root, Binaries: bins,
				Resolved: map[string]*Kernel{"bookworm": kernel},
				QEMU:     QEMU{Binary: "qemu-system-x86_64", MemMB: 512, CPUs: 2, Timeout: 3 * time.Minute, Append: tt.append},
				Modules:  DefaultModules, Tools: DefaultTools, Busybox: busybox,
				TestArgs: []string{"-test.timeout=2m"},
				Logf:     t.Logf,
			}
			runs := Run(ctx, o)
			if len(runs) != 1 {
				t.Fatalf("%d runs", len(runs))
			}
			r := runs[0]
			if !strings.HasPrefix(r.Release, "6.1.") {
				t.Errorf("release %q, want 6.1.x", r.Release)
			}
			if len(r.Packages) != 1 || len(r.Packages[0].Tests) != 2 {
				t.Fatalf("packages %+v; failures %q", r.Packages, r.Failures)
			}
			got := map[string]Outcome{}
			for _, tr := range r.Packages[0].Tests {
				got[tr.Name] = tr.Outcome
			}
			if got["TestEnvironment"] != Pass || got["TestOutcome"] != tt.outcome {
				t.Errorf("outcomes %v, want TestEnvironment pass and TestOutcome %s", got, tt.outcome)
			}
			if len(r.Failures) != len(tt.wantFailures) {
				t.Errorf("failures %q, want %d like %q", r.Failures, len(tt.wantFailures), tt.wantFailures)
			}
			for _, want := range tt.wantFailures {
				found := false
				for _, f := range r.Failures {
					found = found || strings.Contains(f, want)
				}
				if !found {
					t.Errorf("no failure says %q: %q", want, r.Failures)
				}
			}
			if r.Info["controllers"] == "" || !strings.Contains(r.Info["subtree_control"], "cpu") {
				t.Errorf("guest facts %v", r.Info)
			}
			if _, err := os.Stat(filepath.Join(consoles, "console-bookworm.log")); err != nil {
				t.Errorf("console log not kept: %v", err)
			}
		})
	}
}

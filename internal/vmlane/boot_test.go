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

// TestBootSystemd boots the systemd column once with the tests of
// testdata/systemd and testdata/guest and checks that systemd was PID 1,
// that the markers parsed (tests, doctor, result), and that the column's
// default -test.run left the guest package's tests out. The first run
// builds the root filesystem with debootstrap (about a minute more).
func TestBootSystemd(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal(ErrNoQEMU)
	}
	for _, tool := range []string{"debootstrap", "depmod"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: run `lanes-vmlane --install`", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	root, err := ModuleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := ListPackages(ctx, root, []string{"./internal/vmlane/testdata/systemd", "./internal/vmlane/testdata/guest"})
	if err != nil || len(pkgs) != 2 {
		t.Fatalf("list guest packages: %v %v", pkgs, err)
	}
	bin := t.TempDir()
	bins, failed, err := BuildTests(ctx, root, pkgs, bin)
	if err != nil || len(failed) > 0 {
		t.Fatalf("build guest tests: %v %v", failed, err)
	}
	lanes, err := BuildLanes(ctx, root, bin)
	if err != nil {
		t.Fatal(err)
	}
	consoles := t.TempDir()
	o := Options{
		ConsoleDir: consoles,
		Kernels:    []string{SystemdColumn}, Cache: "/var/cache/lanes-vmlane", Root: root, Binaries: bins, Lanes: lanes,
		Mirrors:  SystemMirrors("/etc/apt"),
		QEMU:     QEMU{Binary: "qemu-system-x86_64", MemMB: 512, CPUs: 2, Timeout: 8 * time.Minute},
		Modules:  DefaultModules,
		TestArgs: []string{"-test.timeout=5m"},
		Logf:     t.Logf,
	}
	runs := Run(ctx, o)
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	r := runs[0]
	if len(r.Failures) > 0 {
		t.Errorf("failures: %q", r.Failures)
	}
	if !strings.HasPrefix(r.Release, "6.1.") {
		t.Errorf("release %q, want 6.1.x", r.Release)
	}
	if r.Info["pid1"] != "systemd" || !strings.HasPrefix(r.Info["systemd"], "systemd ") {
		t.Errorf("pid1 %q, systemd %q; want systemd as PID 1", r.Info["pid1"], r.Info["systemd"])
	}
	byPkg := map[string]PackageResult{}
	for _, p := range r.Packages {
		byPkg[p.Package] = p
	}
	sd, guest := byPkg["internal/vmlane/testdata/systemd"], byPkg["internal/vmlane/testdata/guest"]
	if len(sd.Tests) != 1 || sd.Tests[0].Name != "TestSystemdGuest" || sd.Tests[0].Outcome != Pass || sd.ExitCode != 0 {
		t.Errorf("systemd package: %+v", sd)
	}
	if len(guest.Tests) != 0 || guest.ExitCode != 0 {
		t.Errorf("guest package ran %+v despite -test.run=%s", guest.Tests, SystemdDefaultRun)
	}
	if !strings.Contains(r.Info["controllers"], "cpu") || !strings.Contains(r.Info["controllers"], "memory") {
		t.Errorf("guest facts %v", r.Info)
	}
	// The doctor's markers came through; whether lanes works under
	// systemd is for the lanes tests to say.
	if r.Doctor == nil || r.DoctorRC < 0 {
		t.Errorf("lanes doctor: rc %d, %d lines", r.DoctorRC, len(r.Doctor))
	}
	if _, err := os.Stat(filepath.Join(consoles, "console-systemd.log")); err != nil {
		t.Errorf("console log not kept: %v", err)
	}
	for _, tm := range r.Timings {
		t.Logf("timing %s %.1fs", tm.Step, tm.Seconds)
	}
	t.Logf("guest: %s; uptime at tests %s, at end %s; controllers %q; subtree_control %q; state %q",
		r.Info["systemd"], r.Info["uptime-at-init"], r.Info["uptime-at-end"], r.Info["controllers"], r.Info["subtree_control"], r.Info["system-state"])
}

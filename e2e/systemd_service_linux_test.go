package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// sysRun runs systemctl (or another command) and returns its output,
// failing the test on an error unless may is set.
func sysRun(t *testing.T, may bool, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil && !may {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

func mainPID(t *testing.T, unit string) int {
	t.Helper()
	pid, _ := strconv.Atoi(sysRun(t, true, "systemctl", "show", "-p", "MainPID", "--value", unit))
	return pid
}

// pollFor polls cond every 50 ms for up to d.
func pollFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// spawnMovable starts a process that lanes move may put in a lane: where
// systemd owns the tree and this test runs in a service (the kernel
// matrix's systemd guest), in a scope of its own (systemd-run --scope),
// since lanes does not take a service's processes out of it.
func spawnMovable(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	comm, _ := os.ReadFile("/proc/1/comm")
	if strings.TrimSpace(string(comm)) == "systemd" && strings.HasSuffix(cgroupOf(t, os.Getpid()), ".service") {
		args = append([]string{"--scope", "--quiet", "--collect", "--", name}, args...)
		c := spawn(t, nil, "systemd-run", args...)
		// systemd-run execs the command once its scope holds it.
		if !pollFor(10*time.Second, func() bool { return strings.HasSuffix(cgroupOf(t, c.Process.Pid), ".scope") }) {
			t.Fatalf("systemd-run --scope: process %d still in %q", c.Process.Pid, cgroupOf(t, c.Process.Pid))
		}
		return c
	}
	return spawn(t, nil, name, args...)
}

// lanesJournal is lanesd's journal without the goroutine dumps of a
// watchdog abort.
func lanesJournal(t *testing.T) string {
	var keep []string
	for _, l := range strings.Split(sysRun(t, true, "journalctl", "-u", "lanes", "--no-pager", "-o", "short-monotonic"), "\n") {
		if strings.Contains(l, ".go:") || strings.Contains(l, "0x") || strings.Contains(l, "goroutine") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// lanes from the Debian package, run by systemd, on a host where systemd
// owns the cgroup tree (the kernel matrix's systemd guest): installed with
// dpkg and started by its postinst; lanes run lands in the lane's slice
// and systemctl status shows it there; the background lane takes only
// what the interactive one leaves of a CPU; a rule does not take a
// service's process out of it and systemctl stop still stops the service;
// systemctl reload applies a changed config; the watchdog restarts a hung
// lanesd, which adopts its lanes; stopping lanes leaves no slice or scope.
func TestSystemdService(t *testing.T) {
	testutil.RequireSystemd(t)
	deb := os.Getenv("LANES_DEB")
	if deb == "" {
		t.Skip("no LANES_DEB: the kernel matrix's systemd guest gives the package built from this checkout")
	}
	if _, err := os.Stat(deb); err != nil {
		t.Fatalf("LANES_DEB: %v", err)
	}
	t.Cleanup(func() {
		exec.Command("systemctl", "stop", "lanes").Run()
		exec.Command("dpkg", "--purge", "lanes").Run()
		os.RemoveAll("/run/systemd/system/lanes.service.d")
		exec.Command("systemctl", "daemon-reload").Run()
	})
	t.Logf("install: %s", sysRun(t, false, "dpkg", "-i", deb))
	if st := sysRun(t, true, "systemctl", "is-active", "lanes"); st != "active" {
		t.Fatalf("lanes.service after dpkg -i: %s\n%s", st, sysRun(t, true, "journalctl", "-u", "lanes", "--no-pager", "-n", "30"))
	}
	// The debug hook that hangs lanesd's loop, for the watchdog's test
	// below, and a shorter watchdog.
	dropin := "/run/systemd/system/lanes.service.d"
	os.MkdirAll(dropin, 0o755)
	if err := os.WriteFile(filepath.Join(dropin, "debug.conf"), []byte("[Service]\nEnvironment=LANESD_DEBUG_HOOKS=1\nWatchdogSec=10s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sysRun(t, false, "systemctl", "daemon-reload")
	sysRun(t, false, "systemctl", "restart", "lanes")
	doctor := sysRun(t, true, "lanes", "doctor")
	if !strings.Contains(doctor, "systemd: a slice per lane") {
		t.Errorf("lanes doctor does not say systemd places the lanes:\n%s", doctor)
	}

	// lanes run: the command lands in lanes_background.slice.
	run := func(laneName string, args ...string) *exec.Cmd {
		cmd := exec.Command("lanes", append([]string{"run", "-l", laneName, "--"}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	bg := run("background", "sleep", "300")
	want := "/lanes_background.slice/lanes_background.scope"
	if !pollFor(10*time.Second, func() bool { return cgroupOf(t, bg.Process.Pid) == want }) {
		t.Fatalf("lanes run -l background: process in %q, want %q", cgroupOf(t, bg.Process.Pid), want)
	}
	status := sysRun(t, true, "systemctl", "status", "--no-pager", "lanes_background.slice")
	if !strings.Contains(status, "lanes_background.scope") || !strings.Contains(status, strconv.Itoa(bg.Process.Pid)) {
		t.Errorf("systemctl status lanes_background.slice does not show process %d:\n%s", bg.Process.Pid, status)
	}
	t.Logf("systemctl status lanes_background.slice:\n%s", status)

	// lanes move of a process in a scope of two: the scope moves whole.
	two := exec.Command("systemd-run", "--scope", "--quiet", "--collect", "--unit", "lanes-e2e-two", "--", "sh", "-c", "sleep 300 & exec sleep 300")
	if err := two.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("systemctl", "kill", "lanes-e2e-two.scope").Run(); two.Process.Kill(); two.Wait() })
	if !pollFor(10*time.Second, func() bool {
		b, _ := os.ReadFile("/sys/fs/cgroup/system.slice/lanes-e2e-two.scope/cgroup.procs")
		return len(strings.Fields(string(b))) == 2
	}) {
		t.Fatal("lanes-e2e-two.scope did not get its two processes")
	}
	out := sysRun(t, false, "lanes", "move", strconv.Itoa(two.Process.Pid), "background")
	if !strings.Contains(out, "moved 2 process(es)") || !strings.Contains(out, "whole systemd unit lanes-e2e-two.scope") {
		t.Errorf("lanes move of a scope's process:\n%s", out)
	}
	t.Logf("lanes move: %s", out)

	// The CPU split: two spinners on one CPU, interactive and background.
	// Up to 3 tries: a TCG guest on a busy host can lose its timer ticks.
	spin := []string{"taskset", "-c", "0", "sh", "-c", "while :; do :; done"}
	testutil.Attempts(t, 3, func(try int) []string {
		ia, bgs := run("interactive", spin...), run("background", spin...)
		defer func() { ia.Process.Kill(); bgs.Process.Kill() }()
		pollFor(5*time.Second, func() bool {
			return strings.HasPrefix(cgroupOf(t, ia.Process.Pid), "/lanes_interactive.slice") && strings.HasPrefix(cgroupOf(t, bgs.Process.Pid), "/lanes_background.slice")
		})
		time.Sleep(500 * time.Millisecond)
		i0, b0 := testutil.ProcCPUTime(t, ia.Process.Pid), testutil.ProcCPUTime(t, bgs.Process.Pid)
		time.Sleep(4 * time.Second)
		di, db := testutil.ProcCPUTime(t, ia.Process.Pid)-i0, testutil.ProcCPUTime(t, bgs.Process.Pid)-b0
		share := float64(di) / float64(max(di+db, 1))
		t.Logf("one CPU, 4 s: interactive %v, background %v: interactive share %.1f%%", di.Round(time.Millisecond), db.Round(time.Millisecond), 100*share)
		if di+db == 0 || share < 0.9 {
			return []string{fmt.Sprintf("interactive share of the CPU both spin on: %.1f%%, want >= 90%% (background is idle)", 100*share)}
		}
		return nil
	})

	// A rule for a service's processes, by systemctl reload.
	cfg := `[[rule]]
lane = "background"
unit = "lanes-e2e-svc.service"

[lanes.batch]
cpu = { weight = 20 }
`
	if err := os.WriteFile("/etc/lanes/lanes.toml", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	sysRun(t, false, "systemctl", "reload", "lanes")
	if !pollFor(10*time.Second, func() bool { _, err := os.Stat("/sys/fs/cgroup/lanes_batch.slice"); return err == nil }) {
		t.Errorf("systemctl reload lanes did not apply the new config: no lanes_batch.slice\n%s", sysRun(t, true, "lanes", "status"))
	}
	sysRun(t, false, "systemd-run", "--unit", "lanes-e2e-svc", "--", "sleep", "300")
	t.Cleanup(func() { exec.Command("systemctl", "stop", "lanes-e2e-svc").Run() })
	svc := 0
	pollFor(10*time.Second, func() bool { svc = mainPID(t, "lanes-e2e-svc.service"); return svc > 0 })
	time.Sleep(2 * time.Second) // the rule has seen the exec
	if cg := cgroupOf(t, svc); cg != "/system.slice/lanes-e2e-svc.service" {
		t.Errorf("the service's process is in %q: a rule took it out of its service", cg)
	}
	journal := sysRun(t, true, "journalctl", "-u", "lanes", "--no-pager", "-n", "50")
	if !strings.Contains(journal, "lanes-e2e-svc.service") || !strings.Contains(journal, "take it out of the service") {
		t.Errorf("lanesd's log does not say why the service's process was not moved:\n%s", journal)
	}
	sysRun(t, false, "systemctl", "stop", "lanes-e2e-svc")
	if st := sysRun(t, true, "systemctl", "is-active", "lanes-e2e-svc"); st == "active" {
		t.Errorf("lanes-e2e-svc still active after systemctl stop")
	}

	// The watchdog: a lanesd whose loop hangs is restarted and adopts.
	old := mainPID(t, "lanes.service")
	sysRun(t, false, "kill", "-USR2", strconv.Itoa(old))
	if !pollFor(40*time.Second, func() bool {
		p := mainPID(t, "lanes.service")
		return p > 0 && p != old && sysRun(t, true, "systemctl", "is-active", "lanes") == "active"
	}) {
		t.Fatalf("the watchdog did not restart a hung lanesd (pid %d):\n%s", old, sysRun(t, true, "journalctl", "-u", "lanes", "--no-pager", "-n", "30"))
	}
	if !strings.Contains(sysRun(t, true, "journalctl", "-u", "lanes", "--no-pager", "-n", "80"), "atchdog") {
		t.Errorf("the journal does not say the watchdog fired")
	}
	if cg := cgroupOf(t, bg.Process.Pid); cg != want {
		t.Errorf("after the watchdog's restart the background process is in %q, want %q", cg, want)
	}
	if out := sysRun(t, true, "lanes", "status"); !strings.Contains(out, "background") {
		t.Errorf("lanes status after the restart:\n%s", out)
	}

	// Stop: nothing of lanes' left in systemd.
	before := cgroupOf(t, os.Getpid())
	procs := sysRun(t, true, "lanes", "ls") + "\n" + sysRun(t, true, "lanes", "ps", "--json")
	sysRun(t, false, "systemctl", "stop", "lanes")
	if units := sysRun(t, true, "systemctl", "list-units", "--all", "--no-legend", "--plain", "lanes_*"); units != "" {
		t.Errorf("units left after systemctl stop lanes:\n%s", units)
	}
	// lanes run started it in this test's unit: it goes back there.
	if cg := cgroupOf(t, bg.Process.Pid); cg != before {
		t.Errorf("after stop the background process is in %q, want %q (where lanes run started)\nlanes ls before the stop:\n%s\n%s", cg, before,
			procs, lanesJournal(t))
	}
}

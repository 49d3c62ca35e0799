package enforce

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// Under systemd a lane is a slice with its processes in a scope: a moved
// process shows in systemctl status of the slice, the lane's CPU settings
// are the slice's properties, a process of a service is not taken out of
// it (and the service stays stoppable), and restoring puts the process
// back into its unit and leaves no lanes unit behind.
func TestSystemdPlacement(t *testing.T) {
	testutil.RequireSystemd(t)
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	prefix := testutil.UniqueName("lanes-sd") + "-"
	e, err := New(Options{Store: store, GroupName: func(n string) string { return prefix + n }})
	if err != nil {
		t.Fatal(err)
	}
	if e.H.Units == nil {
		t.Fatalf("placement under systemd: %+v", e.placement)
	}
	if !strings.HasPrefix(e.placement.Backend, "systemd") {
		t.Errorf("doctor's placement: %+v", e.placement)
	}
	l := lane.Default().Lanes[lane.Background]
	g, err := e.EnsureLane(l)
	if err != nil {
		t.Fatal(err)
	}
	slice, scope := g.Units()
	t.Cleanup(func() { e.RestoreAll() })
	if !strings.HasPrefix(g.V2Path(), "/sys/fs/cgroup/lanes_") {
		t.Errorf("group at %s", g.V2Path())
	}
	if out, err := exec.Command("systemctl", "show", "-p", "ActiveState", "-p", "CPUWeight", slice).CombinedOutput(); err != nil || !strings.Contains(string(out), "ActiveState=active") {
		t.Errorf("systemctl show %s: %s (%v)", slice, out, err)
	} else {
		t.Logf("%s: %s", slice, strings.Join(strings.Fields(string(out)), " "))
	}
	if b, _ := os.ReadFile(filepath.Join(g.V2Path(), "cpu.idle")); strings.TrimSpace(string(b)) != "1" {
		t.Errorf("background slice's cpu.idle = %q, want 1", strings.TrimSpace(string(b)))
	}

	before, err := cgroup.ProcMembership(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	child := testutil.StartChild(t, "sleep 50s")
	if _, err := e.Move([]int{child.PID()}, l, "test"); err != nil {
		t.Fatal(err)
	}
	now, _ := cgroup.ProcMembership(child.PID())
	if want := "/" + slice + "/" + scope; now.V2 != want {
		t.Errorf("moved process in %q, want %q", now.V2, want)
	}
	status, _ := exec.Command("systemctl", "status", "--no-pager", slice).CombinedOutput()
	if !strings.Contains(string(status), scope) || !strings.Contains(string(status), fmt.Sprint(child.PID())) {
		t.Errorf("systemctl status %s does not show %s with process %d:\n%s", slice, scope, child.PID(), status)
	}
	if pids, err := g.Procs(); err != nil || len(pids) != 1 || pids[0] != child.PID() {
		t.Errorf("lane's processes %v (%v), want [%d]", pids, err, child.PID())
	}

	// A process of a service: a rule does not take it out.
	unit := strings.ReplaceAll(prefix, "lanes-", "lanes-test-") + "svc.service"
	t.Cleanup(func() { exec.Command("systemctl", "stop", unit).Run() })
	if out, err := exec.Command("systemd-run", "--unit", unit, "--", "sleep", "50").CombinedOutput(); err != nil {
		t.Fatalf("systemd-run: %s (%v)", out, err)
	}
	var svcPID int
	deadline := time.Now().Add(10 * time.Second)
	for svcPID == 0 && time.Now().Before(deadline) {
		out, _ := exec.Command("systemctl", "show", "-p", "MainPID", "--value", unit).Output()
		fmt.Sscan(strings.TrimSpace(string(out)), &svcPID)
		time.Sleep(20 * time.Millisecond)
	}
	if svcPID == 0 {
		t.Fatalf("no main process for %s", unit)
	}
	from, _ := cgroup.ProcMembership(svcPID)
	if got := e.ServiceOf(from); got != unit {
		t.Errorf("ServiceOf(%q) = %q, want %s", from.V2, got, unit)
	}
	info, _ := ReadProc(svcPID)
	placed, err := e.PlaceBatch(l, []Placement{{PID: svcPID, StartTime: info.StartTime, From: from, Threads: 1, Why: "rule:1"}})
	if err != nil {
		t.Fatal(err)
	}
	var se *SplitError
	if len(placed) != 1 || !errors.As(placed[0].Err, &se) || se.Service != unit {
		t.Errorf("rule placement of a service's process: %+v, want a SplitError for %s", placed, unit)
	} else {
		t.Logf("refused: %v", placed[0].Err)
	}
	if after, _ := cgroup.ProcMembership(svcPID); after.V2 != from.V2 {
		t.Errorf("service process moved to %q", after.V2)
	}
	if out, err := exec.Command("systemctl", "stop", unit).CombinedOutput(); err != nil {
		t.Errorf("systemctl stop %s: %s (%v)", unit, out, err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", svcPID)); err == nil {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", svcPID)); !strings.Contains(string(b), ") Z") {
			t.Errorf("service process %d still running after systemctl stop", svcPID)
		}
	}

	// A scope whose cgroups systemd delegated (a container runtime's): its
	// manager owns them, and a rule leaves it there.
	delUnit := strings.ReplaceAll(prefix, "lanes-", "lanes-test-") + "deleg.scope"
	del := exec.Command("systemd-run", "--scope", "--quiet", "--collect", "-p", "Delegate=yes", "--unit", delUnit, "--", "sleep", "50")
	if err := del.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("systemctl", "stop", delUnit).Run()
		del.Process.Kill()
		del.Wait()
	})
	var delFrom cgroup.Membership
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if delFrom, _ = cgroup.ProcMembership(del.Process.Pid); strings.HasSuffix(delFrom.V2, "/"+delUnit) {
			break
		}
	}
	if !strings.HasSuffix(delFrom.V2, "/"+delUnit) {
		t.Fatalf("systemd-run --scope: process %d in %q, want %s", del.Process.Pid, delFrom.V2, delUnit)
	}
	if got := e.H.DelegatedUnit(delFrom.V2); got != delUnit {
		t.Errorf("DelegatedUnit(%q) = %q, want %s (systemd's trusted.delegate attribute)", delFrom.V2, got, delUnit)
	}
	info, _ = ReadProc(del.Process.Pid)
	placed, err = e.PlaceBatch(l, []Placement{{PID: del.Process.Pid, StartTime: info.StartTime, From: delFrom, Threads: 1, Why: "rule:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(placed) != 1 || !errors.As(placed[0].Err, &se) || !se.Delegated || se.Service != delUnit {
		t.Errorf("rule placement in a delegated scope: %+v, want a delegated SplitError for %s", placed, delUnit)
	} else {
		t.Logf("refused: %v", placed[0].Err)
	}
	if after, _ := cgroup.ProcMembership(del.Process.Pid); after.V2 != delFrom.V2 {
		t.Errorf("process of a delegated scope moved to %q", after.V2)
	}

	// A scope of two processes: moving one moves the scope whole.
	scopeUnit := strings.ReplaceAll(prefix, "lanes-", "lanes-test-") + "two.scope"
	two := exec.Command("systemd-run", "--scope", "--quiet", "--collect", "--unit", scopeUnit, "--", "sh", "-c", "sleep 50 & exec sleep 50")
	if err := two.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		two.Process.Kill()
		two.Wait()
		exec.Command("systemctl", "stop", scopeUnit).Run()
		exec.Command("pkill", "-f", "^sleep 50$").Run()
	})
	var peers []int
	deadline = time.Now().Add(10 * time.Second)
	for len(peers) < 2 && time.Now().Before(deadline) {
		peers, _ = cgroup.ReadProcs(e.H, "/system.slice/"+scopeUnit)
		time.Sleep(20 * time.Millisecond)
	}
	if len(peers) != 2 {
		t.Fatalf("%s holds %v, want 2 processes", scopeUnit, peers)
	}
	pids, units := e.WithUnits([]int{two.Process.Pid})
	if len(pids) != 2 || len(units) != 1 || units[0].Unit != scopeUnit || units[0].Procs != 2 {
		t.Fatalf("WithUnits(%d) = %v, %+v; want both processes of %s", two.Process.Pid, pids, units, scopeUnit)
	}
	if _, err := e.Move(pids, l, "test"); err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		if m, _ := cgroup.ProcMembership(p); m.V2 != "/"+slice+"/"+scope {
			t.Errorf("process %d of %s in %q after the move", p, scopeUnit, m.V2)
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st, _ := exec.Command("systemctl", "is-active", scopeUnit).Output(); strings.TrimSpace(string(st)) != "active" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, _ := exec.Command("systemctl", "is-active", scopeUnit).Output(); strings.TrimSpace(string(st)) == "active" {
		t.Errorf("%s still active with no process", scopeUnit)
	}
	// A rule placing one process of a scope of two takes the other along.
	ruleUnit := strings.ReplaceAll(prefix, "lanes-", "lanes-test-") + "rule.scope"
	rs := exec.Command("systemd-run", "--scope", "--quiet", "--collect", "--unit", ruleUnit, "--", "sh", "-c", "sleep 51 & sleep 51 & wait")
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rs.Process.Kill()
		rs.Wait()
		exec.Command("pkill", "-f", "^sleep 51$").Run()
	})
	var rpeers []int
	deadline = time.Now().Add(10 * time.Second)
	for len(rpeers) < 3 && time.Now().Before(deadline) {
		rpeers, _ = cgroup.ReadProcs(e.H, "/system.slice/"+ruleUnit)
		time.Sleep(20 * time.Millisecond)
	}
	if len(rpeers) != 3 {
		t.Fatalf("%s holds %v, want sh and its 2 sleeps", ruleUnit, rpeers)
	}
	// The rule matches one sleep: sh and the other sleep are neither it
	// nor its children.
	matched := rpeers[0]
	for _, p := range rpeers {
		if p != rs.Process.Pid {
			matched = p
			break
		}
	}
	rfrom, _ := cgroup.ProcMembership(matched)
	rinfo, _ := ReadProc(matched)
	rplaced, err := e.PlaceBatch(l, []Placement{{PID: matched, StartTime: rinfo.StartTime, From: rfrom, Threads: 1, Why: "rule:2"}})
	if err != nil || len(rplaced) != 1 || rplaced[0].Err != nil {
		t.Fatalf("rule placement in a scope: %+v, %v", rplaced, err)
	}
	if rplaced[0].Unit != ruleUnit || len(rplaced[0].Descendants) != 2 {
		t.Errorf("rule placement of %d: unit %q, with %v; want %s whole", matched, rplaced[0].Unit, rplaced[0].Descendants, ruleUnit)
	}
	for _, p := range rpeers {
		if m, _ := cgroup.ProcMembership(p); m.V2 != "/"+slice+"/"+scope {
			t.Errorf("process %d of %s in %q after the rule", p, ruleUnit, m.V2)
		}
	}

	// The test's own unit is a service: nothing is added for it.
	if pids, units := e.WithUnits([]int{os.Getpid()}); len(pids) != 1 || len(units) != 0 {
		t.Errorf("WithUnits of a service's process: %v %+v", pids, units)
	}

	// Restore: back into the test's own unit, and no lanes unit left.
	if err := e.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	now, _ = cgroup.ProcMembership(child.PID())
	if now.V2 != before.V2 {
		t.Errorf("restored process in %q, want %q (where it came from)", now.V2, before.V2)
	}
	// The scope moved whole is back, under its own name.
	for _, p := range peers {
		if m, _ := cgroup.ProcMembership(p); m.V2 != "/system.slice/"+scopeUnit {
			t.Errorf("process %d of %s restored to %q", p, scopeUnit, m.V2)
		}
	}
	out, _ := exec.Command("systemctl", "list-units", "--all", "--no-legend", "--plain", "lanes_*").CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, strings.TrimSuffix(cgroup.SliceUnit(prefix), ".slice")) {
			t.Errorf("left behind: %s", line)
		}
	}
	if _, err := os.Stat(g.V2Path()); !os.IsNotExist(err) {
		t.Errorf("slice's cgroup %s still there: %v", g.V2Path(), err)
	}
}

package systemd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// A slice made, configured, given a scope with a process, and stopped, all
// through systemd: the cgroup files hold what the properties say, and
// nothing is left.
func TestSystemdSliceAndScope(t *testing.T) {
	testutil.RequireSystemd(t)
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	if err := Probe(h); err != nil {
		t.Fatalf("probe under systemd: %v", err)
	}
	m, err := Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	t.Logf("connected over %s", m.Via)
	group := testutil.UniqueName("lanes-sdt") + "-bg"
	slice, scope := cgroup.SliceUnit(group), cgroup.ScopeUnit(group)
	dir := filepath.Join(h.V2Root, slice)
	t.Cleanup(func() { m.Stop(scope); m.Stop(slice) })

	created, err := m.EnsureSlice(slice)
	if err != nil || !created {
		t.Fatalf("EnsureSlice: created %v, %v", created, err)
	}
	if created, err := m.EnsureSlice(slice); err != nil || created {
		t.Fatalf("EnsureSlice again: created %v, %v", created, err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("slice's cgroup: %v", err)
	}
	read := func(file string) string {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	for _, tc := range []struct{ file, value, want string }{
		{"cpu.weight", "50", "50"},
		{"cpu.max", "20000 100000", "20000 100000"},
		{"cpu.max", "max 100000", "max 100000"},
		{"io.weight", "default 30", "default 30"},
	} {
		ok, err := m.SetCgroupFile(slice, tc.file, tc.value)
		if err != nil || !ok {
			t.Fatalf("%s=%s: ok %v, %v", tc.file, tc.value, ok, err)
		}
		// systemd writes the file itself.
		deadline := time.Now().Add(5 * time.Second)
		for read(tc.file) != tc.want && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if got := read(tc.file); got != tc.want {
			t.Errorf("%s after the property: %q, want %q", tc.file, got, tc.want)
		}
	}
	if ok, err := m.SetCgroupFile(slice, "cpu.idle", "1"); err != nil {
		t.Errorf("cpu.idle: %v", err)
	} else if ok && read("cpu.idle") != "1" {
		t.Errorf("CPUWeight=idle accepted but cpu.idle is %q", read("cpu.idle"))
	} else if !ok {
		t.Logf("this systemd has no CPUWeight=idle: lanes writes cpu.idle itself")
	}

	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	if err := m.StartScope(scope, slice, sleep.Process.Pid); err != nil {
		t.Fatal(err)
	}
	cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", sleep.Process.Pid))
	if want := "0::/" + slice + "/" + scope; strings.TrimSpace(string(cg)) != want {
		t.Errorf("process in %q, want %q", strings.TrimSpace(string(cg)), want)
	}
	if u, err := m.UnitOf(sleep.Process.Pid); err != nil || u != scope {
		t.Errorf("systemd counts the process in %q (%v), want %s", u, err, scope)
	}
	if st, err := m.ActiveState(scope); err != nil || st != "active" {
		t.Errorf("scope %s: %q, %v", scope, st, err)
	}
	if err := m.Stop(scope); err != nil {
		t.Fatal(err)
	}
	sleep.Wait() // stopping the scope ends its processes
	if err := m.Stop(slice); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("slice's cgroup still there after stop: %v", err)
	}
	if err := m.Stop("lanes_never\\x2dmade.slice"); err != nil {
		t.Errorf("stopping a unit systemd does not know: %v", err)
	}
}

package cgroup

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// Procs moves processes through open files, tells a missing process from
// other errors, and refuses to write after Close.
func TestProcs(t *testing.T) {
	testutil.RequireRoot(t)
	h, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	g := h.Group(testutil.UniqueName("lanes-t-procs"))
	if _, err := g.Create(); err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	p, err := g.OpenProcs()
	if err != nil {
		t.Skipf("open cgroup.procs: %v", err)
	}
	c := exec.Command("sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	before, err := ProcMembership(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		pid     int
		close   bool
		wantErr bool
		isProc  bool
	}{
		{"a live process", c.Process.Pid, false, false, false},
		{"no such process", 1<<22 + 1, false, true, false},
		{"invalid PID", -1, false, true, true},
		{"after Close", c.Process.Pid, true, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.close {
				p.Close()
			}
			err := p.Add(tc.pid)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Add(%d): %v, want error %v", tc.pid, err, tc.wantErr)
			}
			var pe *ProcessError
			if tc.isProc && !errors.As(err, &pe) {
				t.Errorf("Add(%d): %v, want a *ProcessError", tc.pid, err)
			}
		})
	}
	if m, _ := ProcMembership(c.Process.Pid); m.V1[CPU] == before.V1[CPU] && m.V2 == before.V2 {
		t.Errorf("process not moved: %+v", m)
	}
	h.Restore(c.Process.Pid, before)
}

// StatFiles.CountProcs counts what Procs lists, from the v2 group where
// there is one.
func TestCountProcs(t *testing.T) {
	testutil.RequireRoot(t)
	h, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	g := h.Group(testutil.UniqueName("lanes-t-count"))
	if _, err := g.Create(); err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	sf := g.StatFiles()
	defer sf.Close()
	if n, err := sf.CountProcs(); err != nil || n != 0 {
		t.Fatalf("empty group: %d, %v", n, err)
	}
	for i := 0; i < 3; i++ {
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		before, _ := ProcMembership(c.Process.Pid)
		defer func() { h.Restore(c.Process.Pid, before); c.Process.Kill(); c.Wait() }()
		if err := g.AddProc(c.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	pids, err := g.Procs()
	n, err2 := sf.CountProcs()
	if err != nil || err2 != nil || n != 3 || len(pids) != 3 {
		t.Errorf("CountProcs %d (%v), Procs %v (%v): want 3", n, err2, pids, err)
	}
}

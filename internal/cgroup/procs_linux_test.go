package cgroup

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
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
// there is one: none, a few, and more than its first buffer holds (the
// list is a record per process, read to its end); ProcsDirID is the
// inode of the v2 directory counted.
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
	if g.V2Path() != "" {
		var st syscall.Stat_t
		if err := syscall.Stat(g.V2Path(), &st); err != nil {
			t.Fatal(err)
		}
		if id, err := sf.ProcsDirID(); err != nil || id != st.Ino {
			t.Errorf("ProcsDirID %d, %v; want the v2 directory's inode %d", id, err, st.Ino)
		}
	}
	have := 0
	for _, want := range []int{0, 3, 1500} {
		for ; have < want; have++ {
			c := exec.Command("sleep", "60")
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
		if err != nil || err2 != nil || n != want || len(pids) != want {
			t.Errorf("CountProcs %d (%v), Procs %d (%v): want %d", n, err2, len(pids), err, want)
		}
	}
}

// A counter file read through StatFiles is its whole text, when it is
// larger than the buffer too (read again whole into a larger one), and
// the same text the next time.
func TestStatFilesWholeRecord(t *testing.T) {
	testutil.RequireRoot(t)
	h, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	g := h.Group(testutil.UniqueName("lanes-t-whole"))
	if _, err := g.Create(); err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	want, err := g.ReadFile(CPU, "cpu.stat")
	if err != nil {
		t.Fatal(err)
	}
	sf := g.StatFiles()
	defer sf.Close()
	sf.buf = make([]byte, 16)
	for i := range 2 {
		got, err := sf.ReadFile(CPU, "cpu.stat")
		// The usage fields move between reads; the field names do not.
		if err != nil || fields(got) != fields(want) {
			t.Errorf("read %d: %q, %v; want %q", i, got, err, want)
		}
	}
}

// fields is the first word of each line.
func fields(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return strings.Join(out, " ")
}

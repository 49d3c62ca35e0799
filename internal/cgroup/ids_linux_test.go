package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// The cache reads a process's file once per set of groups, remembers only
// ids its directories have, and keeps only the hierarchies lanes moves
// processes in.
func TestMembershipCache(t *testing.T) {
	h, g := newGroup(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	read := func() ([]byte, error) { return os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)) }
	before, err := ProcMembership(pid)
	if err != nil {
		t.Fatal(err)
	}
	rootIDs, err := h.GroupIDs(before)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.AddProc(pid); err != nil {
		t.Fatal(err)
	}
	after, err := ProcMembership(pid)
	if err != nil {
		t.Fatal(err)
	}
	groupIDs, err := h.GroupIDs(after)
	if err != nil {
		t.Fatal(err)
	}
	if groupIDs == rootIDs {
		t.Fatalf("the group has the ids of where the process was: %+v", groupIDs)
	}
	c := NewMembershipCache(h)
	reads := 0
	counted := func() ([]byte, error) { reads++; return read() }
	for i, tc := range []struct {
		name      string
		ids       IDs
		read      func() ([]byte, error)
		wantReads int
		wantLen   int
		wantErr   bool
	}{
		{name: "first lookup reads", ids: groupIDs, read: counted, wantReads: 1, wantLen: 1},
		{name: "second is remembered", ids: groupIDs, read: counted, wantReads: 1, wantLen: 1},
		{name: "ids the file does not match are not remembered", ids: rootIDs, read: counted, wantReads: 2, wantLen: 1},
		{name: "again", ids: rootIDs, read: counted, wantReads: 3, wantLen: 1},
		{name: "a read error", ids: IDs{V2: 1, CPU: 2, IO: 3}, read: func() ([]byte, error) { return nil, errors.New("gone") }, wantReads: 3, wantLen: 1, wantErr: true},
	} {
		m, err := c.Lookup(tc.ids, tc.read)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%d %s: err %v", i, tc.name, err)
		}
		if reads != tc.wantReads || c.Len() != tc.wantLen {
			t.Errorf("%d %s: %d reads, %d entries; want %d, %d", i, tc.name, reads, c.Len(), tc.wantReads, tc.wantLen)
		}
		if err != nil {
			continue
		}
		if m.V2 != after.V2 || m.V1[CPU] != after.V1[CPU] || m.V1["blkio"] != after.V1["blkio"] {
			t.Errorf("%d %s: membership %+v, the process is in %+v", i, tc.name, m, after)
		}
		for ctrl := range m.V1 {
			if root := h.V1[ctrl]; root != h.CPURoot && root != h.BlkioRoot {
				t.Errorf("%d %s: kept %s, a hierarchy lanes does not move processes in", i, tc.name, ctrl)
			}
		}
	}
}

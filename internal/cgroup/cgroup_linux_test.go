package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// newGroup detects the host's hierarchy and creates a fresh test group,
// removed when the test ends (after its processes are killed).
func newGroup(t *testing.T) (*Hierarchy, Group) {
	t.Helper()
	testutil.RequireRoot(t)
	h, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	// No h.Undo here: test binaries of several packages run at once and
	// one undoing a controller would pull it from under another.
	g := h.Group(testutil.UniqueName("lanes-t"))
	created, err := g.Create()
	if err != nil {
		t.Fatal(err)
	}
	if !created {
		t.Fatalf("Create(%s) = false on a new group", g.Name())
	}
	t.Cleanup(func() { removeEventually(t, g) })
	return h, g
}

// removeEventually removes g, waiting up to 5 s for killed members to go.
func removeEventually(t *testing.T, g Group) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := g.Remove()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			t.Errorf("remove %s: %v", g.Name(), err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestGroupLifecycle(t *testing.T) {
	h, g := newGroup(t)
	if !g.Exists() {
		t.Fatal("Exists = false after Create")
	}
	created, err := g.Create()
	if err != nil || created {
		t.Fatalf("second Create = %v, %v; want false, nil", created, err)
	}
	groups, err := h.ListGroups("lanes-t")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(groups, func(x Group) bool { return x.Name() == g.Name() }) {
		t.Errorf("ListGroups does not list %s", g.Name())
	}
	c := testutil.StartChild(t, "sleep 30s")
	c.Line(t)
	if err := g.AddProc(c.PID()); err != nil {
		t.Fatal(err)
	}
	err = g.Remove()
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "still has processes") {
		t.Errorf("Remove with a member = %v, want ErrBusy", err)
	}
	procs, err := g.Procs()
	if err != nil || !slices.Equal(procs, []int{c.PID()}) {
		t.Errorf("Procs = %v, %v; want [%d]", procs, err, c.PID())
	}
}

func TestRemoveIdempotent(t *testing.T) {
	_, g := newGroup(t)
	for i := 0; i < 2; i++ {
		if err := g.Remove(); err != nil {
			t.Fatalf("Remove #%d: %v", i+1, err)
		}
	}
	if g.Exists() {
		t.Error("Exists = true after Remove")
	}
}

func TestAddProcNoSuchProcess(t *testing.T) {
	_, g := newGroup(t)
	// A PID above pid_max cannot exist.
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{max + 1, 0, -5} {
		err := g.AddProc(pid)
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("AddProc(%d) = %v, want an error wrapping os.ErrNotExist", pid, err)
			continue
		}
		if !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("AddProc(%d) = %q, want it to say the process does not exist", pid, err)
		}
	}
}

// inGroup reports whether /proc/PID[/task/TID]/cgroup puts the task in g
// in every hierarchy g has.
func inGroup(t *testing.T, h *Hierarchy, g Group, procPath string) bool {
	t.Helper()
	b, err := os.ReadFile(procPath + "/cgroup")
	if err != nil {
		t.Fatalf("read %s/cgroup: %v", procPath, err)
	}
	m, err := ParseMembership(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := "/" + g.Name()
	if h.V2Root != "" && m.V2 != want {
		return false
	}
	if h.CPURoot != "" && m.V1["cpu"] != want {
		return false
	}
	if h.BlkioRoot != "" && m.V1["blkio"] != want {
		return false
	}
	return true
}

func TestDescendantsFollow(t *testing.T) {
	h, g := newGroup(t)
	c := testutil.StartChild(t, "forker 30s")
	before, err := strconv.Atoi(c.Line(t))
	if err != nil {
		t.Fatal(err)
	}
	desc, err := Descendants(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(desc, before) {
		t.Fatalf("Descendants(%d) = %v, missing grandchild %d", c.PID(), desc, before)
	}
	for _, p := range append([]int{c.PID()}, desc...) {
		if err := g.AddProc(p); err != nil {
			t.Fatal(err)
		}
	}
	if !inGroup(t, h, g, "/proc/"+strconv.Itoa(before)) {
		t.Errorf("grandchild %d forked before the move is not in %s", before, g.Name())
	}
	// Fork another one now that the child is in the group.
	if _, err := c.Stdin.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	after, err := strconv.Atoi(c.Line(t))
	if err != nil {
		t.Fatal(err)
	}
	if !inGroup(t, h, g, "/proc/"+strconv.Itoa(after)) {
		t.Errorf("grandchild %d forked after the move is not in %s", after, g.Name())
	}
	procs, err := g.Procs()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{c.PID(), before, after} {
		if !slices.Contains(procs, p) {
			t.Errorf("Procs = %v, missing %d", procs, p)
		}
	}
}

func TestMultiThreadedMovesWhole(t *testing.T) {
	h, g := newGroup(t)
	c := testutil.StartChild(t, "threads 4 30s")
	c.Line(t)
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(c.PID()) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 5 {
		t.Fatalf("child has %d threads, want >= 5", len(tasks))
	}
	// Pin every thread to the last CPU: the move must keep that. The Go
	// runtime may start a thread from one not pinned yet (a clone begun
	// before its parent was pinned shows up a little later): pin until two
	// scans 20 ms apart find every thread pinned.
	var pinned unix.CPUSet
	pinned.Set(runtime.NumCPU() - 1)
	clean := 0
	for round := 0; clean < 2; round++ {
		if round == 40 {
			t.Fatal("threads of the child keep appearing unpinned")
		}
		clean++
		for tid, set := range affinities(c.PID()) {
			if set != pinned {
				clean = 0
				if err := unix.SchedSetaffinity(tid, &pinned); err != nil {
					t.Fatal(err)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := affinities(c.PID())
	if err := g.AddProc(c.PID()); err != nil {
		t.Fatal(err)
	}
	tasks, err = os.ReadDir("/proc/" + strconv.Itoa(c.PID()) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	// Every thread keeps what it had; one started during the move gets
	// the affinity all the others share.
	for tid, set := range affinities(c.PID()) {
		want, ok := before[tid]
		if !ok {
			want = pinned
		}
		if set != want {
			t.Errorf("thread %d: affinity %v after the move, want %v as before (present before: %v)", tid, set, want, ok)
		}
	}
	for _, task := range tasks {
		p := "/proc/" + strconv.Itoa(c.PID()) + "/task/" + task.Name()
		if !inGroup(t, h, g, p) {
			b, _ := os.ReadFile(p + "/cgroup")
			t.Errorf("thread %s is not in %s:\n%s", task.Name(), g.Name(), b)
		}
	}
}

func TestRestore(t *testing.T) {
	h, g := newGroup(t)
	c := testutil.StartChild(t, "sleep 30s")
	c.Line(t)
	orig, err := ProcMembership(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.AddProc(c.PID()); err != nil {
		t.Fatal(err)
	}
	if !inGroup(t, h, g, "/proc/"+strconv.Itoa(c.PID())) {
		t.Fatal("child not in the group after AddProc")
	}
	if err := h.Restore(c.PID(), orig); err != nil {
		t.Fatal(err)
	}
	now, err := ProcMembership(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(now, orig) {
		t.Errorf("after Restore membership = %+v, want %+v", now, orig)
	}
	if err := g.Remove(); err != nil {
		t.Errorf("Remove after Restore: %v", err)
	}
}

func TestAddTree(t *testing.T) {
	h, g := newGroup(t)
	c := testutil.StartChild(t, "forker 30s")
	grandchild, err := strconv.Atoi(c.Line(t))
	if err != nil {
		t.Fatal(err)
	}
	moved, err := g.AddTree(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(moved, c.PID()) || !slices.Contains(moved, grandchild) {
		t.Errorf("AddTree moved %v, want %d and %d", moved, c.PID(), grandchild)
	}
	for _, p := range []int{c.PID(), grandchild} {
		if !inGroup(t, h, g, "/proc/"+strconv.Itoa(p)) {
			t.Errorf("process %d is not in %s after AddTree", p, g.Name())
		}
	}
}

// BenchmarkAddProc moves one sleeping process back and forth between two
// groups: the cost of one AddProc (every hierarchy).
func BenchmarkAddProc(b *testing.B) {
	testutil.RequireRoot(b)
	h, err := Detect()
	if err != nil {
		b.Fatal(err)
	}
	var gs [2]Group
	for i := range gs {
		gs[i] = h.Group(testutil.UniqueName("lanes-b"))
		if _, err := gs[i].Create(); err != nil {
			b.Fatal(err)
		}
		g := gs[i]
		b.Cleanup(func() {
			deadline := time.Now().Add(5 * time.Second)
			for g.Remove() != nil && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	c := testutil.StartChild(b, "threads 4 60s")
	c.Line(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := gs[i%2].AddProc(c.PID()); err != nil {
			b.Fatal(err)
		}
	}
}

// DelegatedUnit finds the outermost unit whose directory carries systemd's
// delegation attribute, or a user manager by its name, on a tree of plain
// directories standing in for the v2 mount (the attribute is what systemd
// sets; the guest with systemd checks it on a real Delegate=yes scope).
func TestDelegatedUnit(t *testing.T) {
	root := t.TempDir()
	dirs := []string{
		"system.slice/box.service/payload/inner.scope",
		"system.slice/plain.service/sub",
		"user.slice/user-1000.slice/user@1000.service/app.slice/term.scope",
		"machine.slice/libpod-1.scope/container",
	}
	for _, d := range dirs {
		if err := os.MkdirAll(root+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mark := func(dir string) {
		if err := unix.Setxattr(root+"/"+dir, "user.delegate", []byte("1"), 0); err != nil {
			t.Skipf("this file system takes no user.* attributes (%v)", err)
		}
	}
	mark("system.slice/box.service")
	mark("machine.slice/libpod-1.scope")
	mark("system.slice/box.service/payload/inner.scope") // inside another: the outer one counts
	h := &Hierarchy{V2Root: root}
	for _, tt := range []struct{ path, want string }{
		{"/system.slice/box.service", "box.service"},
		{"/system.slice/box.service/payload/inner.scope", "box.service"},
		{"/system.slice/plain.service", ""},
		{"/system.slice/plain.service/sub", "plain.service"}, // a group inside: delegated (older systemd)
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope", "user@1000.service"},
		{"/user.slice/user-1000.slice/session-3.scope", ""},
		{"/machine.slice/libpod-1.scope/container", "libpod-1.scope"},
		{"/", ""},
		{"/system.slice/../system.slice/box.service", ""},
	} {
		if got := h.DelegatedUnit(tt.path); got != tt.want {
			t.Errorf("DelegatedUnit(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
	if got := (&Hierarchy{}).DelegatedUnit("/system.slice/box.service"); got != "" {
		t.Errorf("without a v2 mount: %q", got)
	}
}

// A mount namespace reached through another process (lanesd under `ip
// netns exec`, its hierarchy found through an ancestor's mounts) stays
// reachable after that process exits: holdNamespace keeps the namespace
// and its root open. The process here is alone in a mount namespace of
// its own (unshare -m), which without the hold would be torn down, and
// its mounts with it, when it exits.
func TestHoldNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	h, err := DetectMounts()
	if err != nil || h.Via != "" {
		t.Skipf("this mount namespace has no cgroup mounts of its own (%v)", err)
	}
	probe := h.V2Root
	if probe == "" {
		probe = h.CPURoot
	}
	c := exec.Command("unshare", "-m", "sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	pid := c.Process.Pid
	ours, _ := os.Readlink("/proc/self/ns/mnt")
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if ns != ours && strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("unshare -m sleep: no namespace of its own after 10 s (%s, %q)", ns, comm)
		}
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	via, err := holdNamespace(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(via, "/proc/self/fd/") {
		t.Fatalf("holdNamespace = %q, want a /proc/self/fd/ path", via)
	}
	c.Process.Kill()
	c.Wait()
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/root" + probe); err == nil {
		t.Fatalf("the process's root still reachable after it exited: the test proves nothing")
	}
	hv, err := hierarchyVia(string(b), via, pid)
	if err != nil {
		t.Fatalf("after the process exited: %v", err)
	}
	if hv.ViaPID != pid || !strings.HasPrefix(hv.CPURoot+hv.V2Root, via) {
		t.Errorf("hierarchy %+v, want its roots under %s and ViaPID %d", hv, via, pid)
	}
	// The cgroup filesystem is mounted there: its own files, not an
	// empty directory of a detached tree.
	f := "/cgroup.procs"
	if _, err := os.Stat(via + probe + f); err != nil {
		t.Errorf("a cgroup file through the held namespace: %v", err)
	}
}

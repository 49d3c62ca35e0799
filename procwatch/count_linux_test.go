package procwatch

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// The process count against the kernel's own list: groups holding no
// process, one process with threads, and many processes, with a child
// group's processes not counted in its parent's; a removed group's id
// counts -1; too many ids are refused.
func TestCount(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFeature(t, "bpf process count", ProbeCount)
	c, err := NewCounter()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	if h.V2Root == "" {
		t.Skip("no cgroup v2 hierarchy: the count is of v2 groups")
	}
	mk := func(parent, name string) string {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for range 50 {
				if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Errorf("group %s left behind", dir)
		})
		return dir
	}
	top := mk(h.V2Root, testutil.UniqueName("lanes-count-"))
	empty, one, many := mk(top, "empty"), mk(top, "one"), mk(top, "many")
	child := mk(many, "child")
	// The processes' cleanups run before the groups' (registered
	// earlier, run later).
	into := func(dir string, cmd *exec.Cmd) {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, openDir(t, dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	for range 300 {
		into(many, exec.Command("sleep", "60"))
	}
	for range 7 {
		into(child, exec.Command("sleep", "60"))
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A process with threads counts once.
	threaded := roleCmd(self, "thread")
	out, err := threaded.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := threaded.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	into(one, threaded)
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("child: %q, %v", line, err)
	}
	listed := func(dir string) int {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		return len(strings.Fields(string(b)))
	}
	dirs := []string{empty, one, many, child, top}
	ids := make([]uint64, len(dirs))
	for i, d := range dirs {
		var st syscall.Stat_t
		if err := syscall.Stat(d, &st); err != nil {
			t.Fatal(err)
		}
		ids[i] = st.Ino
	}
	got, err := c.Count(ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range dirs {
		if want := listed(d); got[i] != want {
			t.Errorf("%s: counted %d, cgroup.procs lists %d", filepath.Base(d), got[i], want)
		}
	}
	if got[1] != 1 || got[2] != 300 || got[3] != 7 || got[4] != 0 {
		t.Errorf("counts %v, want [0 1 300 7 0]", got)
	}
	// Reading cgroup.procs against the program, for the log (not
	// asserted: a test checks behaviour).
	const rounds = 200
	t0 := time.Now()
	for range rounds {
		listed(many)
	}
	read := time.Since(t0) / rounds
	t0 = time.Now()
	for range rounds {
		c.Count(ids[2:3])
	}
	t.Logf("300 processes: cgroup.procs read and counted in %v, counted by the program in %v", read, time.Since(t0)/rounds)

	gone := mk(top, "gone")
	var st syscall.Stat_t
	if err := syscall.Stat(gone, &st); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Count([]uint64{st.Ino}); err != nil || got[0] != -1 {
		t.Errorf("a removed group: %v, %v; want -1", got, err)
	}
	if _, err := c.Count(make([]uint64, MaxCount+1)); err == nil {
		t.Errorf("Count took %d groups", MaxCount+1)
	}
}

// openDir opens a group's directory for clone3's CLONE_INTO_CGROUP,
// closed when the test ends.
func openDir(t *testing.T, dir string) int {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	return fd
}

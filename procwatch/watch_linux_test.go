package procwatch

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/monitor"
)

const roleEnv = "LANES_PROCWATCH_ROLE"

// TestMain runs the test binary as a child in a role when asked: after
// its exec it does what the role says, prints "ready" and waits for its
// stdin to close.
func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(child(role))
	}
	// Descriptors this process inherited would reach the children the
	// tests start and count as theirs.
	testutil.KeepInheritedFDs()
	os.Exit(m.Run())
}

func child(role string) int {
	switch role {
	case "thread":
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread() // a thread of its own, started now
			close(done)
			select {}
		}()
		<-done
	case "socket":
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Close()
	case "fork":
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Process.Kill()
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

func startWatch(t *testing.T) (*Watch, *events.Subscription) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireFeature(t, "bpf procwatch", Probe)
	bus := events.New()
	sub, err := bus.Subscribe(events.Options{Name: "test", Topics: []string{"proc.>"}, Queue: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	w, err := Publish(bus, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
		sub.Close()
	})
	return w, sub
}

// waitFor returns the first event of topic for pid on sub.
func waitFor(t *testing.T, sub *events.Subscription, topic string, pid int) events.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("no %s of %d: %v", topic, pid, err)
		}
		if ev.Topic == topic && monitor.PID(ev) == pid {
			return ev
		}
	}
}

// groupIno is the inode number of the directory of pid's group in the
// hierarchy at root, path in it as /proc/PID/cgroup gives it.
func groupIno(t *testing.T, root, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(root, path), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// An exec event carries what /proc says of the process, and its exit
// follows with the same start time.
func TestExecAndExit(t *testing.T) {
	w, sub := startWatch(t)
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "0.5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	ev := waitFor(t, sub, monitor.TopicExec, pid)
	x, ok := ExecOf(ev)
	if !ok {
		t.Fatalf("not an exec of this source: %v", ev)
	}
	st, err := procfs.ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	if x.Start != st.StartTime || x.Comm != "sleep" || x.UID != 0 {
		t.Errorf("exec %+v, /proc says start %d comm %q uid 0", x, st.StartTime, st.Comm)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	m, err := cgroup.ParseMembership(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if h.V2Root != "" {
		if want := groupIno(t, h.V2Root, m.V2); x.Cgroups.V2 != want {
			t.Errorf("v2 group id %d, its directory's inode %d", x.Cgroups.V2, want)
		}
	}
	if h.CPURoot != "" {
		if want := groupIno(t, h.CPURoot, m.V1[cgroup.CPU]); x.Cgroups.CPU != want {
			t.Errorf("cpu group id %d, its directory's inode %d", x.Cgroups.CPU, want)
		}
	}
	if h.BlkioRoot != "" {
		if want := groupIno(t, h.BlkioRoot, m.V1["blkio"]); x.Cgroups.IO != want {
			t.Errorf("blkio group id %d, its directory's inode %d", x.Cgroups.IO, want)
		}
	}
	// The file it executed: sleep's inode; another sleep has the same id,
	// another program another.
	id, ok := w.ExeID(pid, x.Start)
	var exeSt syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/exe", pid), &exeSt); err != nil {
		t.Fatal(err)
	}
	if !ok || id.Inode != exeSt.Ino || id.Dentry == 0 || id.Mount == 0 {
		t.Errorf("ExeID = %+v, %v; want sleep's inode %d", id, ok, exeSt.Ino)
	}
	if _, ok := w.ExeID(pid, x.Start+1); ok {
		t.Error("ExeID answers for another start time")
	}
	// Another program: this test binary (in a guest whose sleep and tail
	// are one busybox, those would be the same file).
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd  *exec.Cmd
		same bool
	}{{exec.Command("sleep", "0.2"), true}, {roleCmd(self, "idle"), false}} {
		c := tc.cmd
		in, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cx, _ := ExecOf(waitFor(t, sub, monitor.TopicExec, c.Process.Pid))
		other, ok := w.ExeID(c.Process.Pid, cx.Start)
		in.Close()
		c.Process.Kill()
		c.Wait()
		if !ok || (other == id) != tc.same {
			t.Errorf("ExeID of %s = %+v (%v), of the first sleep %+v: want same %v", c.Path, other, ok, id, tc.same)
		}
	}
	cmd.Wait()
	exit := waitFor(t, sub, monitor.TopicExit, pid)
	if start, ok := ExitStart(exit); !ok || start != x.Start {
		t.Errorf("exit %v: start %d, want %d", exit, start, x.Start)
	}
	if ppid := exit.Payload["ppid"]; ppid != int64(os.Getpid()) {
		t.Errorf("exit's ppid %v, want %d", ppid, os.Getpid())
	}
	if _, ok := w.ExeID(pid, x.Start); ok {
		t.Error("ExeID kept after the exit")
	}
}

// Settle tells what a process has outside its groups: threads, children
// left in other groups, sockets.
func TestSettle(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFeature(t, "bpf placement check", ProbeSettle)
	s, err := NewSettler()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sock, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	sockFile, err := sock.(*net.UDPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer sockFile.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	files := func(n int, last *os.File) []*os.File {
		fs := make([]*os.File, n)
		for i := range fs {
			fs[i] = null
		}
		fs[n-1] = last
		return fs
	}
	shell := func(script string, extra ...*os.File) func() *exec.Cmd {
		return func() *exec.Cmd {
			c := exec.Command("sh", "-c", script)
			c.ExtraFiles = extra
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			return c
		}
	}
	for _, tc := range []struct {
		name string
		cmd  func() *exec.Cmd
		// moveAway: the process (not its children) is moved to another
		// group before the check.
		moveAway bool
		threads  bool // more than one
		children int
		sockets  bool
	}{
		{name: "nothing", cmd: shell("echo ready; read x")},
		{name: "threads", cmd: func() *exec.Cmd { return roleCmd(self, "thread") }, threads: true},
		{name: "a socket made", cmd: func() *exec.Cmd { return roleCmd(self, "socket") }, threads: true, sockets: true},
		{name: "a socket inherited", cmd: shell("echo ready; read x", sockFile), sockets: true},
		{name: "a socket at descriptor 100", cmd: shell("echo ready; read x", files(98, sockFile)...), sockets: true},
		{name: "100 descriptors, no socket", cmd: shell("echo ready; read x", files(98, null)...)},
		{name: "descriptors beyond 4096", cmd: shell("echo ready; read x", files(5000, null)...), sockets: true},
		{name: "a child in its group", cmd: shell("sleep 30 & echo ready; read x")},
		{name: "a child left behind", cmd: shell("sleep 30 & sleep 30 & echo ready; read x"), moveAway: true, children: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.name) > 0 && strings.Contains(tc.name, "beyond 4096") {
				needFDs(t, 12000) // Go moves each descriptor above the highest before placing it: twice as many
			}
			c := tc.cmd()
			in, err := c.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				var lim syscall.Rlimit
				syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
				nrOpen, _ := os.ReadFile("/proc/sys/fs/nr_open")
				t.Fatalf("%v (open files limit %d/%d, nr_open %s)", err, lim.Cur, lim.Max, strings.TrimSpace(string(nrOpen)))
			}
			pid := c.Process.Pid
			defer func() {
				in.Close()
				syscall.Kill(-pid, syscall.SIGKILL)
				c.Wait()
			}()
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "ready" {
				t.Fatalf("child: %q, %v", line, err)
			}
			if tc.moveAway {
				moveAway(t, h, pid)
			}
			st, err := procfs.ReadStat(pid)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Settle([]Proc{{PID: pid, Start: st.StartTime}, {PID: pid, Start: st.StartTime + 1}})
			if err != nil {
				t.Fatal(err)
			}
			g := got[0]
			if g.Gone || (g.Threads > 1) != tc.threads || len(g.Children) != tc.children || g.MoreChildren || g.Sockets != tc.sockets {
				t.Errorf("Settle = %+v, want threads>1 %v, %d children, sockets %v", g, tc.threads, tc.children, tc.sockets)
			}
			for _, k := range g.Children {
				if pp, err := cgroup.ParentPID(k); err != nil || pp != pid {
					t.Errorf("child %d: parent %d (%v), want %d", k, pp, err, pid)
				}
			}
			if !got[1].Gone {
				t.Errorf("the same PID under another start time: %+v, want gone", got[1])
			}
		})
	}
	procs := make([]Proc, MaxSettle+1)
	if _, err := s.Settle(procs); err == nil {
		t.Errorf("Settle took %d processes", len(procs))
	}
}

// moveAway moves pid alone into a throwaway v2 group (or v1 cpu group
// where there is no v2 hierarchy), removed when the test ends.
func moveAway(t *testing.T, h *cgroup.Hierarchy, pid int) {
	t.Helper()
	root := h.V2Root
	if root == "" {
		root = h.CPURoot
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	m, err := cgroup.ParseMembership(string(b))
	if err != nil {
		t.Fatal(err)
	}
	back := m.V2
	if root != h.V2Root {
		back = m.V1[cgroup.CPU]
	}
	dir := filepath.Join(root, testutil.UniqueName("lanes-settle-"))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever is left goes back before the group is removed.
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				os.WriteFile(filepath.Join(root, back, "cgroup.procs"), []byte(f), 0)
			}
		}
		for i := 0; i < 50; i++ {
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("remove %s", dir)
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0); err != nil {
		t.Fatal(err)
	}
}

// needFDs raises this process's limit on open files to at least n, or
// skips. It is set even when high enough already: Go gives a child the
// limit this process started with before it places the child's
// descriptors, unless the program set the limit itself.
func needFDs(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	old := lim
	lim.Cur = max(lim.Cur, n)
	lim.Max = max(lim.Max, n)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("open files limited to %d here and not raised to %d: %v", old.Cur, n, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

func roleCmd(self, role string) *exec.Cmd {
	c := exec.Command(self, "-test.run=^$")
	c.Env = append(os.Environ(), roleEnv+"="+role)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c
}

// Records the ring buffer has no room for are counted and published as
// proc.overflow, and the reader is made to read what the ring holds
// without the program's wake-up (which a full ring cannot post).
func TestOverflow(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFeature(t, "bpf procwatch", Probe)
	// An executable of this test's own, so that its execs are told from
	// those of whatever else runs on the machine (other test packages).
	// A script: the kernel names the process after the file it was
	// asked to run. (A copy of true(1) under another name fails where
	// true is a busybox applet, which exits 127 for a name it does not
	// know.)
	exe := filepath.Join(t.TempDir(), fmt.Sprintf("pwovf%d", os.Getpid()%100000))
	name := filepath.Base(exe)
	if err := os.WriteFile(exe, []byte("#!"+shellBinary(t)+"\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bus := events.New()
	sub, err := bus.Subscribe(events.Options{Name: "test", Topics: []string{"proc.>"}, Queue: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// A page of ring (64 records), a wake-up a minute away and a reader
	// that never reads on a timer of its own: the ring fills, and only
	// the overflow's poke has it read. (With its timer, a reader that
	// met a record on its way to waiting, or a machine busy with other
	// processes, reads every millisecond, and 100 execs one after
	// another fill no ring.)
	w, err := publish(bus, t.Logf, loadOptions{ringBytes: uint32(os.Getpagesize()), wakeDelay: time.Minute, noPolling: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for range 100 {
		if err := exec.Command(exe).Run(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	overflow, ours := false, 0
	for !overflow || ours == 0 {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after 100 execs into a page of ring: overflow %v, %d of the execs read: %v (stats %+v)", overflow, ours, err, w.Stats())
		}
		switch ev.Topic {
		case monitor.TopicOverflow:
			overflow = true
		case monitor.TopicExec:
			if x, ok := ExecOf(ev); ok && x.Comm == name {
				ours++
			}
		}
	}
	if st := w.Stats(); st.Overflows == 0 || st.Execs == 0 {
		t.Errorf("stats %+v: want overflows, and execs read", st)
	}
}

// shellBinary is the path of sh(1).
func shellBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no sh(1): %v", err)
	}
	return p
}

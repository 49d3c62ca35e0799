package procfs

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startNamed starts a copy of sleep named name (its comm) and returns it.
func startNamed(t *testing.T, name string) *exec.Cmd {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// waitStat polls pid's stat until ok accepts it.
func waitStat(t *testing.T, pid int, ok func(Stat) bool) Stat {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := ReadStat(pid)
		if err == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d: last stat %+v, %v", pid, s, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRealProcesses reads live processes: one named like its test case
// (spaces, parentheses), through ReadStat and through a Reader.
func TestRealProcesses(t *testing.T) {
	self, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"plain", "a) (b", "two words", ")", "x (y) z"} {
		t.Run(name, func(t *testing.T) {
			cmd := startNamed(t, name)
			pid := cmd.Process.Pid
			// The comm changes at exec: wait for the child's name.
			s := waitStat(t, pid, func(s Stat) bool { return s.Comm == name })
			var r Reader
			rs, err := r.Stat(pid)
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range []Stat{s, rs} {
				if got.PID != pid || got.PPID != os.Getpid() || got.Threads != 1 || got.Exited() || got.KernelThread() {
					t.Errorf("stat of %d = %+v, want pid %d, ppid %d, 1 thread, alive", pid, got, pid, os.Getpid())
				}
				if got.StartTime < self.StartTime {
					t.Errorf("child's start time %d is before the test's %d", got.StartTime, self.StartTime)
				}
			}
			exe, err := r.Exe(pid)
			if err != nil || filepath.Base(exe) != name {
				t.Errorf("Exe = %q, %v; want .../%s", exe, err, name)
			}
			u, err := r.UIDs(pid)
			if err != nil || u.Real != os.Getuid() || u.Effective != os.Geteuid() {
				t.Errorf("UIDs = %+v, %v; want real %d, effective %d", u, err, os.Getuid(), os.Geteuid())
			}
			if cg, err := r.File(pid, "cgroup"); err != nil || !strings.Contains(string(cg), ":") {
				t.Errorf("cgroup = %q, %v", cg, err)
			}
			// The child is among this process's threads' children.
			tids, err := Threads(os.Getpid())
			if err != nil || len(tids) < 1 || !slices.Contains(tids, os.Getpid()) {
				t.Fatalf("Threads(self) = %v, %v", tids, err)
			}
			if HasChildrenFile() {
				var kids []int
				for _, tid := range tids {
					c, err := r.Children(os.Getpid(), tid)
					if err != nil && !errors.Is(err, ErrNoProcess) {
						t.Fatal(err)
					}
					kids = append(kids, c...)
				}
				if !slices.Contains(kids, pid) {
					t.Errorf("children of %d = %v, want %d among them", os.Getpid(), kids, pid)
				}
			}
			pids, err := PIDs()
			if err != nil || !slices.Contains(pids, pid) || !slices.Contains(pids, os.Getpid()) {
				t.Errorf("PIDs() has not %d and %d (%d pids, %v)", pid, os.Getpid(), len(pids), err)
			}
		})
	}
}

// TestExitedProcess: a zombie reads as exited; once reaped, every read
// says the process is gone.
func TestExitedProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	s := waitStat(t, pid, Stat.Exited)
	if s.State != 'Z' {
		t.Errorf("state %c, want Z", s.State)
	}
	if exe, err := Exe(pid); err != nil || exe != "" {
		t.Errorf("Exe of a zombie = %q, %v; want none", exe, err)
	}
	cmd.Wait()
	var r Reader
	_, err1 := ReadStat(pid)
	_, err2 := r.Stat(pid)
	_, err3 := ReadUIDs(pid)
	_, err4 := r.Exe(pid)
	_, err5 := Threads(pid)
	_, err6 := Children(pid, pid)
	for i, err := range []error{err1, err2, err3, err4, err5, err6} {
		if !errors.Is(err, ErrNoProcess) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("read %d of a reaped process: %v, want ErrNoProcess and fs.ErrNotExist", i+1, err)
		}
	}
	if Exists(pid) {
		t.Errorf("Exists(%d) after reaping", pid)
	}
	for _, pid := range []int{0, -1} {
		if _, err := ReadStat(pid); !errors.Is(err, ErrNoProcess) {
			t.Errorf("ReadStat(%d) = %v, want ErrNoProcess", pid, err)
		}
	}
}

// TestKernelThread reads kthreadd (PID 2 where the host has one).
func TestKernelThread(t *testing.T) {
	s, err := ReadStat(2)
	if err != nil || s.Comm != "kthreadd" {
		t.Skipf("no kthreadd at PID 2 here (%+v, %v): a container's own PID namespace", s, err)
	}
	if !s.KernelThread() || s.PPID != 0 {
		t.Errorf("kthreadd: %+v, want a kernel thread with ppid 0", s)
	}
	if exe, err := Exe(2); err != nil || exe != "" {
		t.Errorf("Exe(kthreadd) = %q, %v; want none", exe, err)
	}
}

// TestReadSmallLarge: a file larger than the first buffer is read whole.
func TestReadSmallLarge(t *testing.T) {
	big, err := ReadSmall("/proc/kallsyms")
	if err != nil {
		t.Skip(err)
	}
	if len(big) < 4096 {
		t.Skipf("/proc/kallsyms is %d bytes here", len(big))
	}
	if ref, _ := os.ReadFile("/proc/kallsyms"); len(ref) != len(big) {
		t.Errorf("ReadSmall(/proc/kallsyms) = %d bytes, os.ReadFile %d", len(big), len(ref))
	}
}

func BenchmarkStat(b *testing.B) {
	pid := os.Getpid()
	b.Run("ReadStat", func(b *testing.B) {
		for b.Loop() {
			if _, err := ReadStat(pid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Reader.Stat", func(b *testing.B) {
		var r Reader
		for b.Loop() {
			if _, err := r.Stat(pid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Threads", func(b *testing.B) {
		for b.Loop() {
			if _, err := Threads(pid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("os.ReadDir(task)", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.ReadDir("/proc/self/task"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// SocketFDs lists this process's sockets once each (a duplicated
// descriptor is not listed again), and no other descriptor.
func TestSocketFDs(t *testing.T) {
	before, err := SocketFDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	dup, err := unix.FcntlInt(uintptr(pair[0]), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dup)
	f, err := os.CreateTemp(t.TempDir(), "notasocket")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	after, err := SocketFDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var added []int
	for _, fd := range after {
		if !slices.Contains(before, fd) {
			added = append(added, fd)
		}
	}
	slices.Sort(added)
	if len(added) != 2 || added[1] != pair[1] || (added[0] != pair[0] && added[0] != dup) {
		t.Errorf("new sockets %v, want one of %d/%d (the same socket) and %d; file %d is not one", added, pair[0], dup, pair[1], f.Fd())
	}
	if _, err := SocketFDs(0); !errors.Is(err, ErrNoProcess) {
		t.Errorf("SocketFDs(0): %v, want ErrNoProcess", err)
	}
}

// Started puts a process's start on the wall clock to its tick (10 ms):
// between just before and just after the test started it.
func TestStarted(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	time.Sleep(50 * time.Millisecond) // away from the test binary's start
	before := time.Now()
	cmd := exec.Command(sleep, "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	time.Sleep(100 * time.Millisecond)
	got, err := Started(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	const tick = time.Second / UserHZ
	if got.Before(before.Add(-tick)) || got.After(after.Add(tick)) {
		t.Errorf("started at %v, want between %v and %v (a tick either side)", got.Format(time.StampMicro), before.Format(time.StampMicro), after.Format(time.StampMicro))
	}
	if _, err := Started(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("a pid that does not exist: %v, want ErrNoProcess", err)
	}
}

// LastCPU reads the CPU a thread runs on: this test's own thread, pinned
// to each CPU in turn.
func TestLastCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var own unix.CPUSet
	if err := unix.SchedGetaffinity(0, &own); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &own)
	tid := unix.Gettid()
	for c := range 1024 {
		if !own.IsSet(c) {
			continue
		}
		var set unix.CPUSet
		set.Set(c)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			t.Fatal(err)
		}
		if got, err := LastCPU(tid); err != nil || got != c {
			t.Errorf("LastCPU of a thread pinned to CPU %d = %d, %v", c, got, err)
		}
	}
	if _, err := LastCPU(1 << 30); err == nil {
		t.Error("LastCPU of no such thread: no error")
	}
}

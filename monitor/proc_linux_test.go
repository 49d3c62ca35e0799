package monitor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// waitEvent reads events until want matches or the deadline passes.
func waitEvent(t *testing.T, ch <-chan Event, timeout time.Duration, what string, want func(Event) bool) Event {
	t.Helper()
	deadline := time.After(timeout)
	overflows := 0
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("event channel closed while waiting for %s", what)
			}
			if ev.Kind == Overflow {
				overflows++
			}
			if want(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s within %s (%d overflow events seen)", what, timeout, overflows)
			return Event{}
		}
	}
}

func listen(t *testing.T) *ProcConnector {
	t.Helper()
	testutil.RequireRoot(t)
	p, err := ListenProc(t.Logf)
	if err != nil {
		t.Fatalf("ListenProc: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func start(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

func TestProcConnectorExecExit(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int // wait status
	}{
		{"sleep", []string{"/bin/sleep", "1"}, 0},
		{"exit 3", []string{"/bin/sh", "-c", "sleep 0.2; exit 3"}, 3 << 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := listen(t)
			cmd := start(t, tt.args[0], tt.args[1:]...)
			pid := cmd.Process.Pid
			waitEvent(t, p.Events(), 2*time.Second, "exec event of the child", func(e Event) bool {
				return e.Kind == Exec && e.TGID == pid && e.PID == pid
			})
			ev := waitEvent(t, p.Events(), 3*time.Second, "exit event of the child", func(e Event) bool {
				return e.Kind == Exit && e.TGID == pid && e.PID == pid
			})
			if ev.ExitCode != tt.wantCode {
				t.Errorf("exit status %#x, want %#x", ev.ExitCode, tt.wantCode)
			}
			if ev.ParentTGID != os.Getpid() {
				t.Errorf("exit event's parent %d, want this process %d", ev.ParentTGID, os.Getpid())
			}
		})
	}
}

func TestProcConnectorFork(t *testing.T) {
	p := listen(t)
	// The shell forks for the background job; the child then execs sleep.
	cmd := start(t, "/bin/sh", "-c", "/bin/sleep 0.3 & wait")
	shell := cmd.Process.Pid
	fork := waitEvent(t, p.Events(), 2*time.Second, "fork event from the shell", func(e Event) bool {
		return e.Kind == Fork && e.ParentTGID == shell
	})
	if fork.PID != fork.TGID || fork.PID == shell {
		t.Errorf("fork event %v: want a new process (PID == TGID != %d)", fork, shell)
	}
	waitEvent(t, p.Events(), 2*time.Second, "exec event of the forked child", func(e Event) bool {
		return e.Kind == Exec && e.TGID == fork.TGID
	})
	waitEvent(t, p.Events(), 3*time.Second, "exit event of the forked child", func(e Event) bool {
		return e.Kind == Exit && e.TGID == fork.TGID
	})
}

func TestProcConnectorCloseEndsEvents(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := ListenProc(t.Logf)
	if err != nil {
		t.Fatalf("ListenProc: %v", err)
	}
	// Make sure events are flowing, so Close has to interrupt a live stream.
	start(t, "/bin/true")
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return within 2s")
	}
	timeout := time.After(2 * time.Second)
	for {
		select {
		case _, ok := <-p.Events():
			if !ok {
				if err := p.Err(); err != nil {
					t.Errorf("Err after Close: %v, want nil", err)
				}
				if err := p.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
				return
			}
		case <-timeout:
			t.Fatal("Events channel not closed 2s after Close")
		}
	}
}

// TestProcConnectorOverflow lets the socket's small receive buffer
// overflow while nobody reads, and expects an Overflow event in place of
// the lost events, and events to flow again afterwards.
func TestProcConnectorOverflow(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := listenProc(t.Logf, 4096, 1)
	if err != nil {
		t.Fatalf("listenProc: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	// Each run is a fork, an exec and an exit: far more than 4 KiB of
	// socket buffer (each message costs several hundred bytes of it).
	for i := 0; i < 100; i++ {
		if err := exec.Command("/bin/true").Run(); err != nil {
			t.Fatal(err)
		}
	}
	waitEvent(t, p.Events(), 5*time.Second, "overflow event", func(e Event) bool { return e.Kind == Overflow })
	// The stream goes on. Other processes on the host may overflow the
	// tiny buffer again, so this waits for any event, not this child's.
	start(t, "/bin/true")
	waitEvent(t, p.Events(), 5*time.Second, "process event after the overflow", func(e Event) bool {
		return e.Kind != Overflow
	})
}

// TestListenProcUnprivileged runs a helper process as nobody. Kernels
// before 6.6 refuse unprivileged listeners, and the error must then say
// what is missing; newer kernels ("connector/cn_proc: Allow non-root users
// access") accept them, and events must then flow.
func TestListenProcUnprivileged(t *testing.T) {
	if os.Getenv("LANES_MONITOR_HELPER") == "listen" {
		p, err := ListenProc(t.Logf)
		if err != nil {
			os.Stdout.WriteString("\nERR:" + err.Error() + "\n")
			return
		}
		defer p.Close()
		cmd := exec.Command("/bin/true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		cmd.Wait()
		waitEvent(t, p.Events(), 2*time.Second, "exec event as nobody", func(e Event) bool {
			return e.Kind == Exec && e.TGID == pid
		})
		os.Stdout.WriteString("\nOK:exec event received\n")
		return
	}
	testutil.RequireRoot(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Copy the test binary where nobody can execute it.
	dir, err := os.MkdirTemp("", "lanes-monitor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "monitor.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestListenProcUnprivileged$", "-test.v")
	cmd.Env = append(os.Environ(), "LANES_MONITOR_HELPER=listen")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	switch s := string(out); {
	case strings.Contains(s, "\nOK:"):
		t.Log("this kernel lets unprivileged users listen; events flowed")
	case strings.Contains(s, "\nERR:") && strings.Contains(s, "needs CAP_NET_ADMIN"):
		t.Log("this kernel refuses unprivileged listeners, with the hint")
	default:
		t.Fatalf("helper neither received events nor said \"needs CAP_NET_ADMIN\":\n%s", s)
	}
}

func TestReadProcessSelf(t *testing.T) {
	p, err := ReadProcess(os.Getpid())
	if err != nil {
		t.Fatalf("ReadProcess(self): %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		t.Fatal(err)
	}
	if p.Exe != exe {
		t.Errorf("Exe %q, want %q", p.Exe, exe)
	}
	if want := filepath.Base(exe); len(want) > 15 && p.Comm != want[:15] || len(want) <= 15 && p.Comm != want {
		t.Errorf("Comm %q, want the executable's base name %q (at most 15 bytes)", p.Comm, want)
	}
	if p.UID != os.Getuid() {
		t.Errorf("UID %d, want %d", p.UID, os.Getuid())
	}
	if u, err := user.Current(); err == nil && p.User != u.Username {
		t.Errorf("User %q, want %q", p.User, u.Username)
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if want := CgroupPath(cg); p.Cgroup != want || !strings.HasPrefix(p.Cgroup, "/") {
		t.Errorf("Cgroup %q, want %q (absolute)", p.Cgroup, want)
	}
}

func TestReadProcessChild(t *testing.T) {
	cmd := start(t, "/bin/sleep", "2")
	want, err := filepath.EvalSymlinks("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	// Between fork and exec the child still runs the test binary: wait
	// for the exec (bounded).
	var got string
	for i := 0; i < 100; i++ {
		p, err := ReadProcess(cmd.Process.Pid)
		if err != nil {
			t.Fatalf("ReadProcess(child): %v", err)
		}
		got = p.Exe + " (comm " + p.Comm + ")"
		// exec switches the executable before it renames the task: wait
		// for both.
		if p.Exe == want && p.Comm == "sleep" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("Exe %s, want %q (comm sleep)", got, want)
}

func TestReadProcessGone(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	_, err := ReadProcess(cmd.Process.Pid)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadProcess(dead pid %d) = %v, want an error wrapping os.ErrNotExist", cmd.Process.Pid, err)
	}
}

func TestScan(t *testing.T) {
	procs, err := Scan()
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	seen := map[int]bool{}
	for _, p := range procs {
		seen[p.PID] = true
		if isKernelThread(p.PID) {
			t.Errorf("Scan returned kernel thread %d (%s)", p.PID, p.Comm)
		}
	}
	if !seen[os.Getpid()] {
		t.Errorf("Scan lacks this process %d", os.Getpid())
	}
	if !seen[1] {
		t.Errorf("Scan lacks PID 1")
	}
}

func TestPollProcs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := PollProcs(ctx, 50*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // let the first snapshot happen
	cmd := start(t, "/bin/sleep", "0.5")
	pid := cmd.Process.Pid
	waitEvent(t, ch, 2*time.Second, "polled exec event", func(e Event) bool {
		return e.Kind == Exec && e.PID == pid
	})
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ch, 2*time.Second, "polled exit event", func(e Event) bool {
		return e.Kind == Exit && e.PID == pid
	})
	cancel()
	timeout := time.After(2 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("PollProcs channel not closed after cancel")
		}
	}
}

// TestProcConnectorExecExitFilter: with the filter, no fork event and no
// thread's exit reaches the reader, while execs and the exits of whole
// processes do; with the filter's forks on, the forks of processes pass
// too (not a thread's); a connector without it sees the forks and the
// thread's exit of the same run.
func TestProcConnectorExecExitFilter(t *testing.T) {
	testutil.RequireRoot(t)
	all, err := ListenProc(t.Logf)
	if err != nil {
		t.Fatalf("ListenProc: %v", err)
	}
	t.Cleanup(func() { all.Close() })
	filtered, err := ListenProcExecExit(t.Logf)
	if err != nil {
		t.Fatalf("ListenProcExecExit: %v", err)
	}
	t.Cleanup(func() { filtered.Close() })
	withForks, err := listenProcFiltered(t.Logf, recvBuffer, eventBuffer, execExitFilter(true), nil)
	if err != nil {
		t.Fatalf("listen with forks: %v", err)
	}
	t.Cleanup(func() { withForks.Close() })

	// A thread of this process that exits.
	// (The runtime keeps the main thread when its goroutine exits: a
	// goroutine that lands there holds it until the test ends, and the
	// next one runs elsewhere.)
	hold := make(chan struct{})
	defer close(hold)
	threadID := 0
	for try := 0; try < 10 && threadID == 0; try++ {
		tid := make(chan int)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			id := syscall.Gettid()
			if id == os.Getpid() {
				tid <- 0
				<-hold
				return
			}
			tid <- id
		}()
		threadID = <-tid
	}
	if threadID == 0 {
		t.Fatal("no goroutine ran on a thread other than the main one")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", threadID)); err != nil {
			break // the thread has exited
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d did not exit", threadID)
		}
	}
	// A shell that forks and execs a child, then a marker: the last event
	// of the run is the marker's exit.
	sh := exec.Command("/bin/sh", "-c", "/bin/true; exit 0")
	if err := sh.Run(); err != nil {
		t.Fatal(err)
	}
	marker := exec.Command("/bin/true")
	if err := marker.Run(); err != nil {
		t.Fatal(err)
	}
	shPID, markerPID := sh.Process.Pid, marker.Process.Pid

	type seen struct{ forkOfShell, threadExit, shellExec, shellExit bool }
	collect := func(ch <-chan Event) seen {
		var s seen
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					t.Fatal("events closed")
				}
				switch {
				case ev.Kind == Fork && ev.ParentTGID == shPID:
					s.forkOfShell = true
				case ev.Kind == Exit && ev.PID == threadID && ev.TGID == os.Getpid():
					s.threadExit = true
				case ev.Kind == Exec && ev.TGID == shPID:
					s.shellExec = true
				case ev.Kind == Exit && ev.PID == shPID && ev.TGID == shPID:
					s.shellExit = true
				}
				if ev.Kind == Fork && ch == filtered.Events() {
					t.Errorf("filtered connector passed a fork: %+v", ev)
				}
				if ev.Kind == Fork && ev.PID != ev.TGID && ch == withForks.Events() {
					t.Errorf("filtered connector with forks passed a thread's fork: %+v", ev)
				}
				if ev.Kind == Exit && ev.PID != ev.TGID && ch != all.Events() {
					t.Errorf("filtered connector passed a thread's exit: %+v", ev)
				}
				if ev.Kind == Exit && ev.TGID == markerPID {
					return s
				}
			case <-deadline:
				t.Fatalf("no exit event of the marker %d", markerPID)
			}
		}
	}
	f := collect(filtered.Events())
	if !f.shellExec || !f.shellExit || f.forkOfShell || f.threadExit {
		t.Errorf("filtered: %+v, want the shell's exec and exit, no fork, no thread exit", f)
	}
	w := collect(withForks.Events())
	if !w.shellExec || !w.shellExit || !w.forkOfShell || w.threadExit {
		t.Errorf("filtered with forks: %+v, want the shell's fork, exec and exit, no thread exit", w)
	}
	a := collect(all.Events())
	if !a.forkOfShell || !a.threadExit || !a.shellExec || !a.shellExit {
		t.Errorf("unfiltered: %+v, want the shell's fork, the thread's exit, the shell's exec and exit", a)
	}
}

// The connector publishing on a bus: a child's exec and exit arrive as
// proc.exec and proc.exit with its pid (and its parent's, at exit).
func TestPublishProcEvents(t *testing.T) {
	testutil.RequireRoot(t)
	bus := events.New()
	t.Cleanup(bus.Close)
	sub, err := bus.Subscribe(events.Options{Name: "test", Topics: []string{"proc.>"}, Queue: 65536})
	if err != nil {
		t.Fatal(err)
	}
	p, err := PublishProcEvents(bus, t.Logf)
	if err != nil {
		t.Fatalf("PublishProcEvents: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	// The child is reaped only after its exit event is read: the kernel
	// names an exiting task's parent only while the task is still hashed,
	// so a parent that reaps at once (cmd.Run) races the event and may
	// leave its ppid 0, which BusEvent documents as "the kernel did not
	// say". A zombie keeps it, so the ppid can be checked exactly.
	cmd := exec.Command("/bin/sh", "-c", "sleep 0.1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	})
	pid := cmd.Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var sawExec, sawFork bool
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("fork seen %v, exec seen %v, exit of %d not seen: %v", sawFork, sawExec, pid, err)
		}
		if ev.Source != ProcSource {
			t.Errorf("source %q", ev.Source)
		}
		if PID(ev) != pid {
			continue
		}
		switch ev.Topic {
		case TopicFork:
			sawFork = true
			if ppid, _ := ev.Payload["ppid"].(int64); int(ppid) != os.Getpid() {
				t.Errorf("fork: ppid %v, want %d", ev.Payload["ppid"], os.Getpid())
			}
		case TopicExec:
			if !sawFork {
				t.Error("exec before fork (proc.> is subscribed: forks are published)")
			}
			sawExec = true
		case TopicExit:
			if !sawExec {
				t.Error("exit before exec")
			}
			if ppid, _ := ev.Payload["ppid"].(int64); int(ppid) != os.Getpid() {
				t.Errorf("exit: ppid %v, want %d", ev.Payload["ppid"], os.Getpid())
			}
			return
		}
	}
}

// Forks are published only while a subscription's patterns match
// proc.fork: the connector follows the subscriptions as they come and go.
func TestPublishProcForksOnDemand(t *testing.T) {
	testutil.RequireRoot(t)
	bus := events.New()
	t.Cleanup(bus.Close)
	// A subscription that takes every proc.* event but asks only for
	// execs and exits: what it sees of forks is what was published.
	spy, err := bus.Subscribe(events.Options{Name: "spy", Topics: []string{"proc.exec", "proc.exit"}, Queue: 65536})
	if err != nil {
		t.Fatal(err)
	}
	p, err := PublishProcEvents(bus, t.Logf)
	if err != nil {
		t.Fatalf("PublishProcEvents: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	run := func() int {
		cmd := exec.Command("/bin/true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		return cmd.Process.Pid
	}
	// forksOf runs a child and reports whether sub saw its fork, waiting
	// for its exit on spy (the marker that the child's events are in).
	forksOf := func(sub *events.Subscription) bool {
		pid := run()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		for {
			ev, err := spy.Next(ctx)
			if err != nil {
				t.Fatalf("exit of %d not seen: %v", pid, err)
			}
			if ev.Topic == TopicExit && PID(ev) == pid {
				break
			}
		}
		seen := false
		for {
			ev, ok := sub.TryNext()
			if !ok {
				return seen
			}
			seen = seen || (ev.Topic == TopicFork && PID(ev) == pid)
		}
	}
	if p.forks.Load() {
		t.Error("forks on with no subscription to proc.fork")
	}
	forkSub, err := bus.Subscribe(events.Options{Name: "forks", Topics: []string{"proc.*"}, Queue: 65536})
	if err != nil {
		t.Fatal(err)
	}
	if !p.forks.Load() {
		t.Fatal("forks off with proc.* subscribed")
	}
	if !forksOf(forkSub) {
		t.Error("proc.* subscribed: the child's fork was not published")
	}
	forkSub.Close()
	if p.forks.Load() {
		t.Error("forks still on after the last proc.fork subscription closed")
	}
	// With forks off the kernel drops them before the socket: not one
	// fork (of any process on the host) reaches the connector.
	read := p.forksRead.Load()
	pid := run()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for {
		ev, err := spy.Next(ctx)
		if err != nil {
			t.Fatalf("exit of %d not seen: %v", pid, err)
		}
		if ev.Topic == TopicExit && PID(ev) == pid {
			break
		}
	}
	if n := p.forksRead.Load() - read; p.filtered && n != 0 {
		t.Errorf("forks off: the socket delivered %d fork events", n)
	}
}

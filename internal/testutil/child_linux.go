package testutil

// Child processes for the privileged tests: the test binary re-executes
// itself with LANES_TEST_CHILD set, and a TestMain that calls ChildMain
// runs the child's role instead of the tests. Every role ends by itself
// within its duration.

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const childEnv = "LANES_TEST_CHILD"

// ChildMain is the TestMain of a package whose tests use StartChild.
func ChildMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	KeepInheritedFDs()
	os.Exit(m.Run())
}

// KeepInheritedFDs marks the descriptors this process inherited (a
// shell's, a CI runner's: any above 2) close-on-exec, so that the children
// a test starts hold only what the test gives them.
func KeepInheritedFDs() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// runChild plays a role: "udp", "udp-connected" and "tcp" (sendLoop),
// "spin DUR CPU" (busy loop, pinned to CPU unless
// -1), "threads N DUR" (N extra OS threads, blocked), "sleep DUR", or
// "forker DUR" (forks a sleeping grandchild, prints its PID, forks another
// after reading a line from stdin, prints it).
func runChild(role string) int {
	f := strings.Fields(role)
	dur := func(i int) time.Duration {
		d, err := time.ParseDuration(f[i])
		if err != nil || d > time.Minute {
			d = time.Minute
		}
		return d
	}
	switch f[0] {
	case "spin":
		runtime.LockOSThread()
		if cpu, _ := strconv.Atoi(f[2]); cpu >= 0 {
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				fmt.Fprintln(os.Stderr, "pin:", err)
				return 1
			}
		}
		fmt.Println("ready")
		end := time.Now().Add(dur(1))
		x := 0
		for time.Now().Before(end) {
			for i := 0; i < 100000; i++ {
				x += i
			}
		}
		_ = x
	case "threads":
		n, _ := strconv.Atoi(f[1])
		started := make(chan struct{})
		for i := 0; i < n; i++ {
			go func() {
				runtime.LockOSThread()
				started <- struct{}{}
				time.Sleep(dur(2))
			}()
		}
		for i := 0; i < n; i++ {
			<-started
		}
		fmt.Println("ready")
		time.Sleep(dur(2))
	case "sleep":
		fmt.Println("ready")
		time.Sleep(dur(1))
	case "forker":
		// It forks from a thread other than the one main runs on (the
		// leader, mostly): a child is on the children list of the thread
		// that forked it, as in a Go or Java program.
		runtime.LockOSThread()
		start := func() int {
			pid := make(chan int)
			go func() {
				runtime.LockOSThread() // not main's thread, which is locked
				c := exec.Command(os.Args[0])
				c.Env = append(os.Environ(), childEnv+"=sleep "+f[1])
				if err := c.Start(); err != nil {
					fmt.Fprintln(os.Stderr, "fork:", err)
					os.Exit(1)
				}
				pid <- c.Process.Pid
				c.Wait()
			}()
			return <-pid
		}
		fmt.Println(start())
		in := bufio.NewScanner(os.Stdin)
		if in.Scan() {
			fmt.Println(start())
		}
		time.Sleep(dur(1))
	case "udp", "udp-connected", "tcp":
		return sendLoop(f[0], f[1], dur(2), f[3:])
	default:
		fmt.Fprintln(os.Stderr, "unknown role", role)
		return 2
	}
	return 0
}

// sendLoop plays the roles "udp ADDR DUR [TOS]" (an unconnected UDP
// socket sending to ADDR with sendto), "udp-connected ADDR DUR [TOS]"
// and "tcp ADDR DUR [TOS]" (connected sockets): 100 bytes every 10 ms
// for DUR, from an IPv4 socket whose IP_TOS the program sets to TOS when
// given (its own DSCP). It prints "ready" once the socket is open.
func sendLoop(kind, addr string, d time.Duration, rest []string) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s %s: %s: %v\n", kind, addr, what, err)
		return 1
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fail("address", err)
	}
	sa := &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	typ := unix.SOCK_DGRAM
	if kind == "tcp" {
		typ = unix.SOCK_STREAM
	}
	fd, err := unix.Socket(unix.AF_INET, typ, 0)
	if err != nil {
		return fail("socket", err)
	}
	defer unix.Close(fd)
	if len(rest) > 0 {
		tos, err := strconv.ParseInt(rest[0], 0, 32)
		if err != nil {
			return fail("tos", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_TOS, int(tos)); err != nil {
			return fail("set IP_TOS", err)
		}
	}
	if kind != "udp" {
		if err := unix.Connect(fd, sa); err != nil {
			return fail("connect", err)
		}
	}
	fmt.Println("ready")
	buf := make([]byte, 100)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if kind == "udp" {
			err = unix.Sendto(fd, buf, 0, sa)
		} else {
			_, err = unix.Write(fd, buf)
		}
		if err != nil && !errors.Is(err, unix.ECONNREFUSED) {
			return fail("send", err)
		}
	}
	return 0
}

// Child is a running child process of the test.
type Child struct {
	Cmd   *exec.Cmd
	out   *bufio.Scanner
	Stdin *os.File // the child reads lines from it ("forker" forks again on one)
}

// StartChild starts the test binary in role, in its own process group,
// and kills the group when the test ends.
func StartChild(t testing.TB, role string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+role)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = pr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	t.Cleanup(func() {
		pw.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return &Child{Cmd: cmd, out: bufio.NewScanner(stdout), Stdin: pw}
}

// PID is the child's process ID.
func (c *Child) PID() int { return c.Cmd.Process.Pid }

// Line reads the child's next output line, failing after 10 s.
func (c *Child) Line(t testing.TB) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		if c.out.Scan() {
			got <- c.out.Text()
		} else {
			got <- ""
		}
	}()
	select {
	case s := <-got:
		if s == "" {
			t.Fatalf("child %d ended without output", c.PID())
		}
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("child %d: no output within 10s", c.PID())
	}
	return ""
}

// ChildEnv is the environment entry that makes the test binary play role
// (for a child started by other means than StartChild, e.g. in a network
// namespace and a cgroup).
func ChildEnv(role string) string { return childEnv + "=" + role }

package testutil

// Child processes for the privileged tests: the test binary re-executes
// itself with LANES_TEST_CHILD set, and a TestMain that calls ChildMain
// runs the child's role instead of the tests. Every role ends by itself
// within its duration.

import (
	"bufio"
	"fmt"
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
	os.Exit(m.Run())
}

// runChild plays a role: "spin DUR CPU" (busy loop, pinned to CPU unless
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
		start := func() int {
			c := exec.Command(os.Args[0])
			c.Env = append(os.Environ(), childEnv+"=sleep "+f[1])
			if err := c.Start(); err != nil {
				fmt.Fprintln(os.Stderr, "fork:", err)
				os.Exit(1)
			}
			go c.Wait()
			return c.Process.Pid
		}
		fmt.Println(start())
		in := bufio.NewScanner(os.Stdin)
		if in.Scan() {
			fmt.Println(start())
		}
		time.Sleep(dur(1))
	default:
		fmt.Fprintln(os.Stderr, "unknown role", role)
		return 2
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

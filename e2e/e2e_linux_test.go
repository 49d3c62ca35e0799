package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/disk"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

// env is one lanesd (possibly not running) with its own socket, state and
// config, and the test binary copied where any user may execute it.
type env struct {
	t        *testing.T
	dir      string
	bin      string
	socket   string
	stateDir string
	config   string

	// env is added to lanesd's environment (NAME=value).
	env []string

	d    *exec.Cmd
	log  *syncBuf
	exit chan error
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// logTail is the last n lines of lanesd's log.
func (e *env) logTail(n int) string {
	if e.log == nil {
		return "(no lanesd)"
	}
	lines := strings.Split(strings.TrimRight(e.log.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// logged reports whether lanesd's log contains want (after undoing slog's
// quoting of `"`), waiting up to two seconds: lanesd writes a line before
// it answers the request that caused it, but the line reaches this
// process through a pipe that a goroutine of exec copies, which may not
// have run yet when the answer is read.
func (e *env) logged(want string) bool {
	deadline := time.Now().Add(2 * time.Second)
	for {
		if strings.Contains(strings.ReplaceAll(e.log.String(), `\"`, `"`), want) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newEnv(t *testing.T, config string) *env {
	t.Helper()
	testutil.RequireRoot(t)
	matrixShard(t)
	dir, err := os.MkdirTemp("", "lanes-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	e := &env{t: t, dir: dir, bin: filepath.Join(dir, "lanes"), socket: filepath.Join(dir, "lanes.sock"),
		stateDir: filepath.Join(dir, "state"), config: filepath.Join(dir, "lanes.toml")}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		e.writeConfig(config)
	}
	return e
}

func (e *env) writeConfig(text string) {
	e.t.Helper()
	if err := os.WriteFile(e.config, []byte(text), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) daemonArgs() []string {
	args := []string{"--socket", e.socket, "--state-dir", e.stateDir}
	if _, err := os.Stat(e.config); err == nil {
		args = append(args, "--config", e.config)
	}
	return args
}

// start runs lanesd and waits until its API answers.
func (e *env) start() {
	e.t.Helper()
	e.startWith([]string{e.bin})
}

// startWith runs lanesd through a prefix (e.g. nsenter ... BIN).
func (e *env) startWith(prefix []string) {
	e.t.Helper()
	e.log = &syncBuf{}
	e.d = exec.Command(prefix[0], append(prefix[1:], e.daemonArgs()...)...)
	e.d.Env = append(append(os.Environ(), roleEnv+"=lanesd"), e.env...)
	e.d.Stdout, e.d.Stderr = e.log, e.log
	if err := e.d.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.exit = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(e.d, e.exit)
	e.t.Cleanup(func() {
		if e.d != nil {
			e.stop()
		}
	})
	// A start that shapes an interface probes and proves the root tree in
	// throwaway namespaces: seconds natively, many times that on an
	// emulated CPU (the kernel matrix).
	wait, ask := 10*time.Second, time.Second
	if testutil.Emulated() {
		// A status answer itself may take seconds there while lanesd is
		// busy (a boosting lane's sockets read every 100 ms).
		wait, ask = time.Minute, 10*time.Second
	}
	deadline := time.Now().Add(wait)
	cl := client.New(e.socket)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), ask)
		_, err := cl.Status(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case err := <-e.exit:
			e.d = nil
			e.t.Fatalf("lanesd exited at start: %v\n%s", err, e.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
	e.t.Fatalf("lanesd did not answer within %v\n%s", wait, e.log)
}

// stop sends SIGTERM and expects a clean exit.
func (e *env) stop() {
	e.t.Helper()
	if e.d == nil {
		return
	}
	e.d.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-e.exit:
		if err != nil {
			e.t.Errorf("lanesd exited with %v\n%s", err, e.log)
		}
	case <-time.After(20 * time.Second):
		e.d.Process.Kill()
		e.t.Errorf("lanesd did not stop within 20s\n%s", e.log)
	}
	e.d = nil
}

// kill9 kills lanesd without letting it clean up.
func (e *env) kill9() {
	e.t.Helper()
	e.d.Process.Kill()
	<-e.exit
	e.d = nil
}

type result struct {
	stdout, stderr string
	code           int
}

func (e *env) lanesCmd(cred *syscall.Credential, args ...string) *exec.Cmd {
	c := exec.Command(e.bin, append([]string{"--socket", e.socket}, args...)...)
	c.Env = append(os.Environ(), roleEnv+"=lanes")
	if cred != nil {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		c.Dir = "/"
	}
	return c
}

func (e *env) lanesAs(cred *syscall.Credential, args ...string) result {
	e.t.Helper()
	c := e.lanesCmd(cred, args...)
	var so, se bytes.Buffer
	c.Stdout, c.Stderr = &so, &se
	err := c.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
			r.code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		e.t.Fatalf("lanes %v: %v", args, err)
	}
	return r
}

func (e *env) lanes(args ...string) result { e.t.Helper(); return e.lanesAs(nil, args...) }

func (e *env) lanesJSON(v any, args ...string) {
	e.t.Helper()
	start := time.Now()
	r := e.lanes(append(args, "--json")...)
	if r.code == 1 && testutil.Emulated() && (args[0] == "status" || args[0] == "ls") &&
		strings.Contains(r.stdout, "Client.Timeout exceeded") {
		// Under TCG, with busy loops on every guest CPU beside a second
		// guest on the host, a read can outlast the client's 30 s: asked
		// once more, said in the log. Any other failure fails the test.
		e.t.Logf("lanes %v timed out after %v under emulation; asking again", args, time.Since(start).Round(time.Millisecond))
		start = time.Now()
		r = e.lanes(append(args, "--json")...)
	}
	if r.code != 0 {
		// With --json the CLI prints its error on stdout; lanesd's last
		// lines say what it was doing meanwhile.
		e.t.Fatalf("lanes %v: exit %d after %v: %s%s\nlanesd's last log lines:\n%s",
			args, r.code, time.Since(start).Round(time.Millisecond), r.stdout, r.stderr, e.logTail(40))
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		e.t.Fatalf("lanes %v: %v\n%s", args, err, r.stdout)
	}
}

// laneOf returns the lane group a process is in ("" if none), read from
// the hierarchy that carries the lane.
func laneOf(t *testing.T, pid int) string {
	t.Helper()
	m, err := cgroup.ProcMembership(pid)
	if err != nil {
		t.Fatalf("membership of %d: %v", pid, err)
	}
	p, ok := m.V1[cgroup.CPU]
	if !ok {
		p = m.V2
	}
	if strings.HasPrefix(p, "/"+cgroup.SlicePrefix) {
		// Under systemd: /lanes_<lane>.slice/lanes_<lane>.scope is the
		// lane's group, lanes-<lane>.
		return cgroup.GroupOfPath(p)
	}
	return strings.TrimPrefix(p, "/")
}

func membership(t *testing.T, pid int) cgroup.Membership {
	t.Helper()
	m, err := cgroup.ProcMembership(pid)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// start a long-lived command, killed at cleanup.
// waitFor polls cond every 10 ms until it holds; after within it fails
// the test, saying what it waited for.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
	}
}

// procState is the state letter of /proc/PID/stat ("R", "S", "Z", ...).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	st, _, _ := strings.Cut(rest, " ")
	return st
}

// runsComm tells whether pid or a descendant runs a command named comm.
func runsComm(pid int, comm string) bool {
	kids, _ := cgroup.Descendants(pid)
	for _, k := range append(kids, pid) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", k)); err == nil && strings.TrimSpace(string(b)) == comm {
			return true
		}
	}
	return false
}

func spawn(t *testing.T, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(name, args...)
	if cred != nil {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// noLanesObjects fails if a cgroup of lanes is left: a lane's group
// (lanes-<lane>), or the private group of a `lanes run` whose process is
// gone. Groups of live runs (other tests, benchmarks) are not ours to judge.
func noLanesObjects(t *testing.T) {
	t.Helper()
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{h.CPURoot, h.V2Root, h.BlkioRoot} {
		if root == "" {
			continue
		}
		ents, _ := os.ReadDir(root)
		for _, en := range ents {
			name := en.Name()
			if !en.IsDir() || !strings.HasPrefix(name, cgroup.Prefix) {
				continue
			}
			if rest, ok := strings.CutPrefix(name, "lanes-run-"); ok {
				pid, _ := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
				if syscall.Kill(pid, 0) == nil {
					continue
				}
			} else if !testLanes[strings.TrimPrefix(name, cgroup.Prefix)] {
				continue // another package's test group
			}
			t.Errorf("left behind: cgroup %s", filepath.Join(root, name))
		}
	}
}

// testLanes are the lanes these tests configure.
var testLanes = map[string]bool{"interactive": true, "normal": true, "background": true, "video": true, "capped": true, "batch": true}

func threads(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, en := range ents {
		n, _ := strconv.Atoi(en.Name())
		out = append(out, n)
	}
	return out
}

// A process tree moves whole into a lane, every thread takes the lane's
// I/O class, and a clean stop puts everything back as it was.
func TestMoveAndRestore(t *testing.T) {
	e := newEnv(t, "")
	// A shell with a child forked before the move.
	sh := spawn(t, nil, "sh", "-c", "sleep 60 & wait")
	waitFor(t, 5*time.Second, "the shell's child", func() bool { return runsComm(sh.Process.Pid, "sleep") })
	kids, err := cgroup.Descendants(sh.Process.Pid)
	if err != nil || len(kids) != 1 {
		t.Fatalf("descendants of the shell: %v %v", kids, err)
	}
	before := membership(t, sh.Process.Pid)
	ioBefore, lvlBefore, _ := disk.GetIOPrio(sh.Process.Pid)
	e.start()

	r := e.lanes("move", strconv.Itoa(sh.Process.Pid), "background")
	if r.code != 0 {
		t.Fatalf("move: %d %s", r.code, r.stderr)
	}
	for _, pid := range []int{sh.Process.Pid, kids[0]} {
		if got := laneOf(t, pid); got != "lanes-background" {
			t.Errorf("process %d in %q, want lanes-background", pid, got)
		}
		for _, tid := range threads(t, pid) {
			if c, _, err := disk.GetIOPrio(tid); err != nil || c != lane.IOIdle {
				t.Errorf("thread %d of %d: io class %q (%v), want idle", tid, pid, c, err)
			}
		}
	}
	var ps api.ProcsResponse
	e.lanesJSON(&ps, "ps")
	found := map[int]string{}
	for _, p := range ps.Procs {
		found[p.PID] = p.Lane + "/" + p.Why
	}
	if found[sh.Process.Pid] != "background/move" || found[kids[0]] != "background/move" {
		t.Errorf("lanes ps: %v", found)
	}

	e.stop()
	if got := membership(t, sh.Process.Pid); got.V2 != before.V2 || got.V1[cgroup.CPU] != before.V1[cgroup.CPU] {
		t.Errorf("after stop: %+v, want %+v", got, before)
	}
	if c, lvl, _ := disk.GetIOPrio(sh.Process.Pid); c != ioBefore || lvl != lvlBefore {
		t.Errorf("after stop: io %s/%d, want %s/%d", c, lvl, ioBefore, lvlBefore)
	}
	noLanesObjects(t)
}

// A multi-threaded process moves whole, and a child it forks after the
// move is in the lane too.
func TestThreadsAndLaterChildrenFollow(t *testing.T) {
	e := newEnv(t, "")
	e.start()
	// The test binary as a spinner has several runtime threads.
	c := exec.Command(e.bin)
	c.Env = append(os.Environ(), roleEnv+"=spin", "LANES_SPIN_SECONDS=20", "LANES_SPIN_FORK_AFTER=1")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	time.Sleep(300 * time.Millisecond)
	if r := e.lanes("move", strconv.Itoa(c.Process.Pid), "interactive"); r.code != 0 {
		t.Fatalf("move: %s", r.stderr)
	}
	for _, tid := range threads(t, c.Process.Pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/cgroup", c.Process.Pid, tid))
		if err != nil {
			t.Fatal(err)
		}
		m, _ := cgroup.ParseMembership(string(b))
		p, ok := m.V1[cgroup.CPU]
		if !ok {
			p = m.V2
		}
		if p != "/lanes-interactive" {
			t.Errorf("thread %d in %s", tid, p)
		}
	}
	// The spinner forks a child one second after it started.
	var kids []int
	for i := 0; i < 40 && len(kids) == 0; i++ {
		time.Sleep(100 * time.Millisecond)
		kids, _ = cgroup.Descendants(c.Process.Pid)
	}
	if len(kids) == 0 {
		t.Fatal("the spinner forked no child")
	}
	if got := laneOf(t, kids[0]); got != "lanes-interactive" {
		t.Errorf("child forked after the move is in %q", got)
	}
}

// Non-root users move only their own processes, into granted lanes; a
// refusal changes nothing.
func TestUnprivilegedCallers(t *testing.T) {
	e := newEnv(t, `
[lanes.video]
unprivileged = false
cpu = { weight = 400 }
`)
	user := testUser(t)
	e.start()
	mine := spawn(t, user, "sleep", "60")
	roots := spawn(t, nil, "sleep", "60")

	cases := []struct {
		name    string
		args    []string
		code    int
		msg     string
		pid     int
		wantGrp string
	}{
		{"own process, granted lane", []string{"move", strconv.Itoa(mine.Process.Pid), "background"}, 0, "moved 1", mine.Process.Pid, "lanes-background"},
		{"other user's process", []string{"move", strconv.Itoa(roots.Process.Pid), "background"}, 4, "belongs to uid 0", roots.Process.Pid, ""},
		{"lane not granted", []string{"move", strconv.Itoa(mine.Process.Pid), "video"}, 4, `lane "video" is not granted`, mine.Process.Pid, "lanes-background"},
		{"reload is root's", []string{"reload"}, 4, "only root may reload", 0, ""},
		{"run in a lane not granted", []string{"run", "-l", "video", "--", "true"}, 125, `lane "video" is not granted`, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.lanesAs(user, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.msg) {
				t.Errorf("exit %d, output %q; want exit %d with %q", r.code, r.stdout+r.stderr, tc.code, tc.msg)
			}
			if tc.pid != 0 {
				if got := laneOf(t, tc.pid); got != tc.wantGrp {
					t.Errorf("process %d in %q, want %q", tc.pid, got, tc.wantGrp)
				}
			}
		})
	}
	if !strings.Contains(e.log.String(), "refused") {
		t.Errorf("denials are not logged:\n%s", e.log)
	}
	// The unprivileged user can run a command in a granted lane.
	r := e.lanesAs(user, "run", "-l", "background", "--", "sh", "-c", "cat /proc/self/cgroup")
	if r.code != 0 || !strings.Contains(r.stdout, "lanes-background") {
		t.Errorf("unprivileged run: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// testUser creates a throwaway user and returns its credentials.
func testUser(t *testing.T) *syscall.Credential {
	t.Helper()
	name := testutil.UniqueName("lt")
	if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	out, err := exec.Command("id", "-u", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	out, _ = exec.Command("id", "-g", name).Output()
	gid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// Bad input, each with its error; nothing changes.
func TestBadInput(t *testing.T) {
	e := newEnv(t, "")
	e.start()
	victim := spawn(t, nil, "sleep", "60")
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zombie.Wait() })
	// It has exited, not yet reaped: a PID that exits during the move.
	waitFor(t, 5*time.Second, "true to exit", func() bool { return procState(zombie.Process.Pid) == "Z" })
	files := map[string]string{
		"malformed.toml": "[lanes.video\ncpu = {}\n",
		"unknown.toml":   "[lanes.video]\ncpu = { weight = 10, speed = 3 }\n",
		"rule.toml":      "[[rule]]\nlane = \"nosuch\"\ncomm = \"x\"\n",
		"cap.toml":       "[lanes.video]\n\ncpu = { cap = 150 }\n",
		"cap0.toml":      "[lanes.video]\ncpu = { cap = 0.0 }\n",
	}
	for n, text := range files {
		os.WriteFile(filepath.Join(e.dir, n), []byte(text), 0o644)
	}
	p := func(n string) string { return filepath.Join(e.dir, n) }
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"malformed TOML", []string{"config", "check", p("malformed.toml")}, 2, "malformed.toml:1"},
		{"unknown key", []string{"config", "check", p("unknown.toml")}, 2, "unknown.toml:2"},
		{"unknown lane in a rule", []string{"config", "check", p("rule.toml")}, 2, "rule.toml:2"},
		{"cap above 100", []string{"config", "check", p("cap.toml")}, 2, "cap.toml:3"},
		{"cap zero", []string{"config", "check", p("cap0.toml")}, 2, "cap0.toml:2"},
		{"unknown lane", []string{"move", strconv.Itoa(victim.Process.Pid), "nosuch"}, 2, `unknown lane "nosuch"`},
		{"PID that does not exist", []string{"move", "4194304", "background"}, 2, "process 4194304 does not exist"},
		{"PID exits during the move", []string{"move", strconv.Itoa(victim.Process.Pid), strconv.Itoa(zombie.Process.Pid), "background"}, 2, "exited"},
		{"not a PID", []string{"move", "abc", "background"}, 2, `"abc" is not a PID`},
		{"command not found", []string{"run", "-l", "background", "--", "lanes-no-such-command"}, 127, "command not found: lanes-no-such-command"},
		{"run without a lane", []string{"run", "true"}, 2, "which lane?"},
		{"run in unknown lane", []string{"run", "-l", "nosuch", "--", "true"}, 125, `unknown lane "nosuch"`},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"unknown flag", []string{"ls", "--frob"}, 2, "unknown flag: --frob"},
		{"too many arguments", []string{"config", "check", "a", "b"}, 2, "accepts 1 arg(s), received 2"},
		{"no daemon", []string{"--socket", filepath.Join(e.dir, "none.sock"), "status"}, 3, "no lanes daemon is running"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.lanes(tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", r.code, r.stderr, tc.code, tc.msg)
			}
		})
	}
	// With --json an error is JSON on stdout, with the daemon's code.
	r := e.lanes("--json", "move", "4194304", "background")
	var je struct {
		Error, Code string
		Exit        int
	}
	if err := json.Unmarshal([]byte(r.stdout), &je); err != nil || r.code != 2 || je.Exit != 2 || je.Code != api.CodeNoProcess || !strings.Contains(je.Error, "4194304") {
		t.Errorf("--json error: exit %d, stdout %q (%v), stderr %q", r.code, r.stdout, err, r.stderr)
	}
	// Nothing changed: the victim of the failed moves is in no lane.
	if got := laneOf(t, victim.Process.Pid); strings.HasPrefix(got, cgroup.Prefix) {
		t.Errorf("victim moved to %s by a failed request", got)
	}
	// lanesd refuses a bad config at start, naming it.
	bad := exec.Command(e.bin, "--socket", filepath.Join(e.dir, "other.sock"), "--state-dir", filepath.Join(e.dir, "s2"), "--config", p("cap.toml"))
	bad.Env = append(os.Environ(), roleEnv+"=lanesd")
	out, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cap.toml:3") {
		t.Errorf("lanesd with a bad config: %s", out)
	}
}

// lanes run passes the exit status and signals through, with and without
// a daemon; without one it leaves nothing behind.
func TestRunPassThrough(t *testing.T) {
	for _, withDaemon := range []bool{true, false} {
		t.Run(map[bool]string{true: "daemon", false: "no daemon"}[withDaemon], func(t *testing.T) {
			e := newEnv(t, "")
			if withDaemon {
				e.start()
			}
			r := e.lanes("run", "-l", "background", "--", "sh", "-c", "grep -q lanes.*background /proc/self/cgroup || exit 9; exit 3")
			if r.code != 3 {
				t.Errorf("exit status %d (stderr %q), want 3", r.code, r.stderr)
			}
			r = e.lanes("run", "-l", "interactive", "--", "sh", "-c", "kill -USR1 $$")
			if r.code != 128+int(syscall.SIGUSR1) {
				t.Errorf("killed by SIGUSR1: got %d, want %d", r.code, 128+int(syscall.SIGUSR1))
			}
			// A signal sent to lanes run reaches the command.
			c := e.lanesCmd(nil, "run", "-l", "background", "--", "sleep", "30")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			// With a daemon lanes run execs the command, without one it
			// starts it as a child.
			waitFor(t, 10*time.Second, "lanes run to start sleep", func() bool { return runsComm(c.Process.Pid, "sleep") })
			c.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			select {
			case <-done:
				ws := c.ProcessState.Sys().(syscall.WaitStatus)
				if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
					t.Errorf("lanes run after SIGTERM: %v", c.ProcessState)
				}
			case <-time.After(10 * time.Second):
				c.Process.Kill()
				t.Fatal("SIGTERM did not end lanes run")
			}
			if !withDaemon {
				noLanesObjects(t)
			}
		})
	}
}

// kill -9 of lanesd: processes keep running in their lanes, a restart
// adopts them, and a stop leaves nothing behind.
func TestCrashRecovery(t *testing.T) {
	e := newEnv(t, "")
	e.start()
	p := spawn(t, nil, "sleep", "60")
	before := membership(t, p.Process.Pid)
	if r := e.lanes("move", strconv.Itoa(p.Process.Pid), "background"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	e.kill9()
	if err := p.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("process died with lanesd: %v", err)
	}
	if got := laneOf(t, p.Process.Pid); got != "lanes-background" {
		t.Fatalf("after kill -9: in %q", got)
	}
	e.start()
	var ps api.ProcsResponse
	e.lanesJSON(&ps, "ps")
	ok := false
	for _, pr := range ps.Procs {
		if pr.PID == p.Process.Pid && pr.Lane == "background" && pr.Why == "move" {
			ok = true
		}
	}
	if !ok {
		t.Errorf("restart does not show the process in background: %+v", ps.Procs)
	}
	e.stop()
	noLanesObjects(t)
	if got := membership(t, p.Process.Pid); got.V1[cgroup.CPU] != before.V1[cgroup.CPU] || got.V2 != before.V2 {
		t.Errorf("after stop: %+v, want %+v", got, before)
	}
}

// A crash of lanesd whose state dir is lost: --cleanup removes what it left.
func TestCleanupWithoutState(t *testing.T) {
	e := newEnv(t, "")
	e.start()
	p := spawn(t, nil, "sleep", "60")
	if r := e.lanes("move", strconv.Itoa(p.Process.Pid), "background"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	e.kill9()
	os.RemoveAll(e.stateDir)
	c := exec.Command(e.bin, append(e.daemonArgs(), "--cleanup")...)
	c.Env = append(os.Environ(), roleEnv+"=lanesd")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("lanesd --cleanup: %v\n%s", err, out)
	}
	noLanesObjects(t)
	if got := laneOf(t, p.Process.Pid); strings.HasPrefix(got, cgroup.Prefix) {
		t.Errorf("process still in %s", got)
	}
}

// Rules place processes already running at start and new ones as they exec.
func TestRules(t *testing.T) {
	e := newEnv(t, "")
	// Copies of the test binary, playing "sleep": one matched by an exe
	// glob, one by its command name.
	data, err := os.ReadFile(e.bin)
	if err != nil {
		t.Fatal(err)
	}
	sleepy := filepath.Join(e.dir, "sleepy")
	os.WriteFile(sleepy, data, 0o755)
	e.writeConfig(fmt.Sprintf("[[rule]]\nlane = \"background\"\nexe = %q\n\n[[rule]]\nlane = \"interactive\"\ncomm = \"lanes-e2e-int\"\n", filepath.Join(e.dir, "sl*")))
	t.Setenv(roleEnv, "sleep") // spawned copies inherit it; lanes and lanesd get their own role
	early := spawn(t, nil, sleepy, "60")
	waitFor(t, 5*time.Second, "the early process to run sleepy", func() bool {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", early.Process.Pid))
		return exe == sleepy
	})
	e.start()
	if got := laneOf(t, early.Process.Pid); got != "lanes-background" {
		t.Errorf("process running at start: in %q\n%s", got, e.log)
	}
	late := spawn(t, nil, sleepy, "60")
	waitLane(t, late.Process.Pid, "lanes-background")
	// comm rule: a copy of sleep named lanes-e2e-int
	intBin := filepath.Join(e.dir, "lanes-e2e-int")
	os.WriteFile(intBin, data, 0o755)
	third := spawn(t, nil, intBin, "60")
	waitLane(t, third.Process.Pid, "lanes-interactive")
	var ps api.ProcsResponse
	e.lanesJSON(&ps, "ps")
	for _, p := range ps.Procs {
		if p.PID == late.Process.Pid && p.Why != "rule:1" {
			t.Errorf("ps says %q for the rule-placed process, want rule:1", p.Why)
		}
	}
	// A process in no lane and matching no rule stays where it is.
	other := spawn(t, nil, "sleep", "60")
	time.Sleep(500 * time.Millisecond)
	if got := laneOf(t, other.Process.Pid); strings.HasPrefix(got, cgroup.Prefix) {
		t.Errorf("unmatched process moved to %s", got)
	}
}

func waitLane(t *testing.T, pid int, want string) {
	t.Helper()
	var got string
	for i := 0; i < 50; i++ {
		if got = laneOf(t, pid); got == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("process %d in %q after 2.5s, want %q", pid, got, want)
}

// Reload: a bad file keeps the running config and says why; a good one
// takes effect; SIGHUP does the same.
func TestReload(t *testing.T) {
	e := newEnv(t, "[lanes.video]\ncpu = { weight = 400 }\n")
	e.start()
	// The lane's group in every hierarchy this host has (v1 cpu and blkio
	// and v2 on hybrid hosts, v2 alone on unified ones): there before the
	// reload, so that "gone after it" cannot hold vacuously.
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	videoDirs := h.LaneGroup("video").Dirs()
	if len(videoDirs) == 0 {
		t.Fatal("no cgroup hierarchy for the lane's group")
	}
	for _, d := range videoDirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("lane video's group before the reload: %v", err)
		}
	}
	e.writeConfig("[lanes.video]\ncpu = { weight = 0 }\n")
	r := e.lanes("reload")
	if r.code == 0 || !strings.Contains(r.stderr, "lanes.toml:2") || !strings.Contains(r.stderr, "running config is kept") {
		t.Errorf("bad reload: %d %q", r.code, r.stderr)
	}
	var st api.Status
	e.lanesJSON(&st, "status")
	if st.ConfigError == "" || len(st.Lanes) != 4 {
		t.Errorf("status after a bad reload: error %q, %d lanes", st.ConfigError, len(st.Lanes))
	}
	e.writeConfig("[lanes.batch]\ncpu = { weight = 50, cap = 30 }\n")
	e.d.Process.Signal(syscall.SIGHUP)
	var names []string
	for i := 0; i < 40; i++ {
		time.Sleep(50 * time.Millisecond)
		var ls api.LanesResponse
		e.lanesJSON(&ls, "ls")
		names = names[:0]
		for _, l := range ls.Lanes {
			names = append(names, l.Name)
		}
		if strings.Join(names, ",") == "interactive,normal,background,batch" {
			break
		}
	}
	if strings.Join(names, ",") != "interactive,normal,background,batch" {
		t.Errorf("after SIGHUP: lanes %v", names)
	}
	for _, d := range videoDirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the removed lane's group %s is still there (%v)", d, err)
		}
	}

	// A bad config by SIGHUP: refused with its file and line in status,
	// the running lanes kept.
	e.writeConfig("[lanes.batch]\ncpu = { weight = 50, cap = 300 }\n")
	e.d.Process.Signal(syscall.SIGHUP)
	var st3 api.Status
	waitFor(t, 5*time.Second, "the bad config's error in status", func() bool {
		e.lanesJSON(&st3, "status")
		return st3.ConfigError != ""
	})
	if !strings.Contains(st3.ConfigError, "lanes.toml:2") {
		t.Errorf("config error after a bad SIGHUP %q, want it to name lanes.toml:2", st3.ConfigError)
	}
	var ls api.LanesResponse
	e.lanesJSON(&ls, "ls")
	names = names[:0]
	for _, l := range ls.Lanes {
		names = append(names, l.Name)
	}
	if strings.Join(names, ",") != "interactive,normal,background,batch" {
		t.Errorf("after a bad SIGHUP: lanes %v, want the running ones kept", names)
	}
}

// A reload whose config is valid but cannot be applied (its network
// interface does not exist): refused, the lanes it added are taken away
// again, the running lanes stay, and status says why.
func TestReloadApplyFailsRollsBack(t *testing.T) {
	e := newEnv(t, "[lanes.video]\ncpu = { weight = 400 }\n")
	e.start()
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	dev := testutil.UniqueName("nx")
	e.writeConfig("[lanes.batch]\ncpu = { weight = 50 }\n[net]\ninterfaces = [\"" + dev + "\"]\nrate = \"20mbit\"\n")
	r := e.lanes("reload")
	if r.code == 0 || !strings.Contains(r.stderr, "apply") {
		t.Errorf("reload with a missing interface: exit %d, %q; want it refused", r.code, r.stderr)
	}
	var ls api.LanesResponse
	e.lanesJSON(&ls, "ls")
	var names []string
	for _, l := range ls.Lanes {
		names = append(names, l.Name)
	}
	if strings.Join(names, ",") != "interactive,normal,background,video" {
		t.Errorf("after a reload that failed to apply: lanes %v, want the running ones", names)
	}
	for _, d := range h.LaneGroup("batch").Dirs() {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the failed reload's lane group %s is still there (%v)", d, err)
		}
	}
	for _, d := range h.LaneGroup("video").Dirs() {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the running lane's group after the rollback: %v", err)
		}
	}
	var st api.Status
	e.lanesJSON(&st, "status")
	found := false
	for _, hl := range st.Health {
		found = found || (hl.Code == "config-apply-failed" && strings.Contains(hl.Message, dev))
	}
	if !found {
		t.Errorf("status health %+v, want config-apply-failed naming %s", st.Health, dev)
	}
	// The running config still works: a move into its lane.
	p := spawn(t, nil, "sleep", "60")
	if r := e.lanes("move", strconv.Itoa(p.Process.Pid), "video"); r.code != 0 {
		t.Errorf("move into the running lane after the rollback: %s", r.stderr)
	}
	e.stop()
	noLanesObjects(t)
}

// A process moved from one lane to another, then a stop: it goes back to
// where it was before the first move, not to the first lane.
func TestMoveLaneToLaneThenStop(t *testing.T) {
	e := newEnv(t, "")
	e.start()
	p := spawn(t, nil, "sleep", "60")
	before := membership(t, p.Process.Pid)
	for _, l := range []string{"interactive", "background"} {
		if r := e.lanes("move", strconv.Itoa(p.Process.Pid), l); r.code != 0 {
			t.Fatalf("move to %s: %s", l, r.stderr)
		}
		if got := laneOf(t, p.Process.Pid); got != cgroup.Prefix+l {
			t.Fatalf("after the move to %s: in %q", l, got)
		}
	}
	e.stop()
	if got := membership(t, p.Process.Pid); got.V1[cgroup.CPU] != before.V1[cgroup.CPU] || got.V2 != before.V2 {
		t.Errorf("after stop: %+v, want where it was before the moves, %+v", got, before)
	}
	noLanesObjects(t)
}

// kill -9 of lanesd, and its state directory lost with it: the next start
// rebuilds the records from the copies kept on the lanes' groups, adopts
// the moved process, and its stop puts the process back.
func TestAdoptionAfterStateLost(t *testing.T) {
	e := newEnv(t, "")
	e.start()
	p := spawn(t, nil, "sleep", "60")
	before := membership(t, p.Process.Pid)
	if r := e.lanes("move", strconv.Itoa(p.Process.Pid), "background"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	e.kill9()
	if err := os.RemoveAll(e.stateDir); err != nil {
		t.Fatal(err)
	}
	e.start()
	var ps api.ProcsResponse
	e.lanesJSON(&ps, "ps")
	adopted := false
	for _, pr := range ps.Procs {
		adopted = adopted || (pr.PID == p.Process.Pid && pr.Lane == "background")
	}
	if !adopted {
		t.Errorf("after the state dir was lost, the restart does not show the process in background: %+v\n%s", ps.Procs, e.log)
	}
	e.stop()
	if got := membership(t, p.Process.Pid); got.V1[cgroup.CPU] != before.V1[cgroup.CPU] || got.V2 != before.V2 {
		t.Errorf("after stop: %+v, want %+v", got, before)
	}
	noLanesObjects(t)
}

// The CPU acceptance checks through the whole stack: two busy loops on one
// CPU, interactive against background; and a lane capped at 20 %.
func TestCPUThroughLanes(t *testing.T) {
	// The capped lane has a large weight so that only its cap holds it
	// back, whatever else runs on the host.
	e := newEnv(t, "[lanes.capped]\ncpu = { weight = 10000, cap = 20 }\n")
	e.start()
	spinIn := func(laneName string, pin ...string) *exec.Cmd {
		c := e.lanesCmd(nil, append(append([]string{"run", "-l", laneName, "--"}, pin...), e.bin)...)
		// lanes run execs taskset, which execs the test binary as a spinner.
		c.Env = append(c.Env, "LANES_SPIN_SECONDS=8", nextRoleEnv+"=spin")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	fg, bg := spinIn("interactive", "taskset", "-c", "0"), spinIn("background", "taskset", "-c", "0")
	time.Sleep(time.Second)
	f0, b0 := testutil.ProcCPUTime(t, fg.Process.Pid), testutil.ProcCPUTime(t, bg.Process.Pid)
	t0 := time.Now()
	time.Sleep(5 * time.Second)
	f1, b1 := testutil.ProcCPUTime(t, fg.Process.Pid), testutil.ProcCPUTime(t, bg.Process.Pid)
	wall := time.Since(t0)
	fgShare := (f1 - f0).Seconds() / wall.Seconds()
	bgShare := (b1 - b0).Seconds() / wall.Seconds()
	t.Logf("one CPU: interactive %.1f%%, background %.1f%%", 100*fgShare, 100*bgShare)
	fg.Process.Kill()
	bg.Process.Kill()

	c := spinIn("capped")
	time.Sleep(time.Second)
	c0 := testutil.ProcCPUTime(t, c.Process.Pid)
	t0 = time.Now()
	time.Sleep(5 * time.Second)
	capShare := (testutil.ProcCPUTime(t, c.Process.Pid) - c0).Seconds() / time.Since(t0).Seconds() / float64(numCPU(t))
	t.Logf("capped lane: %.1f%% of the host", 100*capShare)
	testutil.RequireTiming(t)
	switch {
	case fgShare+bgShare >= 0.97:
		// The two loops had the CPU to themselves.
		if fgShare < 0.95 {
			t.Errorf("interactive got %.1f%% of the CPU, want >= 95%%", 100*fgShare)
		}
	default:
		// Something outside the test took part of the CPU: judge the
		// split between the two loops.
		t.Logf("the loops got %.1f%% of the CPU together: other load on the host", 100*(fgShare+bgShare))
		if pair := fgShare / (fgShare + bgShare); pair < 0.95 {
			t.Errorf("interactive got %.1f%% of the CPU time of the two loops, want >= 95%%", 100*pair)
		}
	}
	if capShare < 0.17 || capShare > 0.23 {
		t.Errorf("capped lane used %.1f%% of the host, want 20 ± 3 %%", 100*capShare)
	}
}

func numCPU(t *testing.T) int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, _ := strconv.Atoi(lo)
		z := a
		if found {
			z, _ = strconv.Atoi(hi)
		}
		n += z - a + 1
	}
	return n
}

// A config's warnings reach the user wherever the config does: lanesd's
// log at start, lanes status, and lanes reload.
func TestConfigWarnings(t *testing.T) {
	e := newEnv(t, "[lanes.video]\nnet.priority = 2\n")
	e.start()
	const want = "lanes.video.net.priority: does nothing"
	if r := e.lanes("status"); !strings.Contains(r.stdout, "warning: "+e.config+":2: "+want) {
		t.Errorf("lanes status does not show the warning:\n%s", r.stdout)
	}
	if !strings.Contains(e.log.String(), want) || !strings.Contains(e.log.String(), "level=WARN") {
		t.Errorf("lanesd does not log the warning at warning level:\n%s", e.log)
	}
	e.writeConfig("\n[lanes.video]\nnet.borrow = true\n")
	if r := e.lanes("reload"); r.code != 0 || !strings.Contains(r.stdout, "warning: "+e.config+":3: lanes.video.net.borrow: does nothing") {
		t.Errorf("lanes reload: exit %d, %q", r.code, r.stdout)
	}
	e.writeConfig("[lanes.video]\ncpu.weight = 50\n")
	if r := e.lanes("reload"); r.code != 0 || strings.Contains(r.stdout, "warning") {
		t.Errorf("lanes reload of a clean file: exit %d, %q", r.code, r.stdout)
	}
	if r := e.lanes("status"); strings.Contains(r.stdout, "warning:") {
		t.Errorf("lanes status still warns after a clean reload:\n%s", r.stdout)
	}
}

// matrixShard splits the end-to-end tests between the kernel matrix's two
// guest kernels: under emulation, where a lanesd start alone takes 15-30
// s, a test runs in the 6.x guest or the 7.x guest by a hash of its name
// (every test runs on the host, in ./scripts/test). Tests of the systemd
// column run wherever they are asked for.
func matrixShard(t *testing.T) {
	t.Helper()
	if !testutil.Emulated() {
		return
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	if strings.Contains(top, "Systemd") {
		return
	}
	rel := features.KernelRelease()
	major, err := strconv.Atoi(strings.SplitN(rel, ".", 2)[0])
	if err != nil {
		return
	}
	h := fnv.New32a()
	h.Write([]byte(top))
	if want := uint32(min(1, max(0, major-6))); h.Sum32()%2 != want {
		t.Skipf("kernel matrix: %s runs in the other guest kernel (the end-to-end tests are split between 6.x and 7.x by name; kernel %s)", top, rel)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/internal/procfs"
)

// postAs sends one request to lanesd as the user cred (nil: root) and
// returns the HTTP status and body.
func (e *env) postAs(cred *syscall.Credential, route, body string) (int, string) {
	e.t.Helper()
	c := exec.Command(e.bin, e.socket, route, body)
	c.Env = append(os.Environ(), roleEnv+"=post")
	c.Dir = "/"
	if cred != nil {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := c.Output()
	if err != nil {
		e.t.Fatalf("post %s %s: %v %s", route, body, err, out)
	}
	code, rest, _ := strings.Cut(string(out), " ")
	n, err := strconv.Atoi(code)
	if err != nil {
		e.t.Fatalf("post %s: %q", route, out)
	}
	return n, rest
}

// uids returns a process's real and effective uid.
func uids(pid int) (real, eff int, err error) {
	u, err := procfs.ReadUIDs(pid)
	return u.Real, u.Effective, err
}

// startTree starts sh -c script as cred in a process group of its own
// (killed whole at cleanup) and waits for its one child to have the real
// and effective uids wanted. It returns the shell and the child.
func startTree(t *testing.T, cred *syscall.Credential, env []string, script string, wantReal, wantEff int) (int, int) {
	t.Helper()
	c := exec.Command("sh", "-c", script)
	c.Env = append(os.Environ(), env...)
	c.Dir = "/"
	c.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		c.Wait()
	})
	sh := c.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", sh, sh))
		if f := strings.Fields(string(b)); len(f) == 1 {
			child, _ := strconv.Atoi(f[0])
			if r, e, err := uids(child); err == nil && r == wantReal && e == wantEff {
				return sh, child
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%q: no child with uid %d, euid %d within 10s", script, wantReal, wantEff)
	return 0, 0
}

// A move changes every process of the trees it is given: an unprivileged
// caller may make it only if every one of them is the caller's (real and
// effective uid) and none leaves a lane that is root's only. A refusal is
// 403, names the process and why, and moves nothing. Root may do it all.
func TestMoveAuthorisation(t *testing.T) {
	e := newEnv(t, `
[lanes.capped]
unprivileged = false
cpu = { cap = 10 }
`)
	user := testUser(t)
	e.start()
	// A setuid-root copy of the test binary: a child of the user's shell
	// that runs with effective uid 0, or (role argument "root") as root.
	suid := filepath.Join(e.dir, "suid")
	self, err := os.ReadFile(e.bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(suid, self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	root := client.New(e.socket)
	uid := int(user.Uid)

	// Each setup returns the PID to request and every process of its tree.
	type setup func(t *testing.T) (int, []int)
	own := func(t *testing.T) (int, []int) {
		p := spawn(t, user, "sleep", "60").Process.Pid
		return p, []int{p}
	}
	roots := func(t *testing.T) (int, []int) {
		p := spawn(t, nil, "sleep", "60").Process.Pid
		return p, []int{p}
	}
	suidChild := func(arg string, real, eff int) setup {
		return func(t *testing.T) (int, []int) {
			sh, child := startTree(t, user, []string{roleEnv + "=suid-sleep"}, suid+" "+arg+" & wait", real, eff)
			return sh, []int{sh, child}
		}
	}
	inCapped := func(t *testing.T) (int, []int) {
		p := spawn(t, user, "sleep", "60").Process.Pid
		if _, err := root.Move(context.Background(), "capped", p); err != nil {
			t.Fatal(err)
		}
		return p, []int{p}
	}
	cases := []struct {
		name   string
		setup  setup
		lane   string
		status map[bool]int // by caller: root or not
		msg    string       // of the refusal; "%d": the PID refused
		// refused: the setup's process the refusal names (index).
		refused int
	}{
		{"own process into an unprivileged lane", own, "background", map[bool]int{false: 200, true: 200}, "", 0},
		{"own process into a root-only lane", own, "capped", map[bool]int{false: 403, true: 200}, `lane "capped" is not granted`, 0},
		{"another user's process", roots, "background", map[bool]int{false: 403, true: 200}, "process %d belongs to uid 0", 0},
		{"parent of a setuid-root child", suidChild("euid", uid, 0), "background", map[bool]int{false: 403, true: 200},
			"process %d (a descendant of", 1},
		{"parent of a child running as root", suidChild("root", 0, 0), "background", map[bool]int{false: 403, true: 200},
			"process %d (a descendant of", 1},
		{"own process out of a root-only lane", inCapped, "background", map[bool]int{false: 403, true: 200},
			`process %d is in lane "capped"`, 0},
	}
	for _, asRoot := range []bool{false, true} {
		for _, tc := range cases {
			name := map[bool]string{false: "user", true: "root"}[asRoot] + "/" + tc.name
			t.Run(name, func(t *testing.T) {
				pid, tree := tc.setup(t)
				before := map[int]string{}
				for _, p := range tree {
					before[p] = laneOf(t, p)
				}
				cred := user
				if asRoot {
					cred = nil
				}
				status, body := e.postAs(cred, api.RouteMove, fmt.Sprintf(`{"pids": [%d], "lane": %q}`, pid, tc.lane))
				want := tc.status[asRoot]
				if status != want {
					t.Fatalf("status %d %s, want %d", status, body, want)
				}
				if want == 200 {
					for _, p := range tree {
						if got := laneOf(t, p); got != "lanes-"+tc.lane {
							t.Errorf("process %d is in %q, want lanes-%s", p, got, tc.lane)
						}
					}
					return
				}
				msg := tc.msg
				if strings.Contains(msg, "%d") {
					msg = fmt.Sprintf(msg, tree[tc.refused])
				}
				var ae api.Error
				if err := json.Unmarshal([]byte(body), &ae); err != nil {
					t.Fatalf("refusal %s: %v", body, err)
				}
				if ae.Code != api.CodeForbidden || !strings.Contains(ae.Message, msg) {
					t.Errorf("refusal %s, want %s with %q", body, api.CodeForbidden, msg)
				}
				for _, p := range tree {
					if got := laneOf(t, p); got != before[p] {
						t.Errorf("process %d moved from %q to %q by a refused request", p, before[p], got)
					}
				}
				if !e.logged("refused: " + strings.SplitN(msg, " (", 2)[0]) {
					t.Errorf("refusal not logged:\n%s", e.log)
				}
			})
		}
	}
}

// daemon.socket_gid decides who may connect: unset, everyone (0666, what
// each may do is decided per request); set, root and that group's members
// (root:GID, 0660), others get no connection at all. A reload applies a
// change.
func TestSocketGID(t *testing.T) {
	member, other := testUser(t), testUser(t)
	gid := int(member.Gid)
	cases := []struct {
		name     string
		config   string
		mode     os.FileMode
		gid      int
		otherIn  bool
		reloaded string // config after a reload, which must give the other case's access
	}{
		{"unset", "", 0o666, 0, true, fmt.Sprintf("[daemon]\nsocket_gid = %d\n", gid)},
		{"group", fmt.Sprintf("[daemon]\nsocket_gid = %d\n", gid), 0o660, gid, false, "[daemon]\nsocket_gid = -1\n"},
	}
	check := func(t *testing.T, e *env, mode os.FileMode, gid int, otherIn bool) {
		t.Helper()
		fi, err := os.Stat(e.socket)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != mode || st.Uid != 0 || int(st.Gid) != gid {
			t.Errorf("socket %v %d:%d, want %v 0:%d", fi.Mode().Perm(), st.Uid, st.Gid, mode, gid)
		}
		if r := e.lanesAs(member, "status"); r.code != 0 {
			t.Errorf("member of the group: exit %d %s", r.code, r.stderr)
		}
		r := e.lanesAs(other, "status")
		if otherIn && r.code != 0 {
			t.Errorf("other user: exit %d %s", r.code, r.stderr)
		}
		if !otherIn && (r.code != 4 || !strings.Contains(r.stderr, "permission denied")) { // 4: refused
			t.Errorf("other user: exit %d %q, want 4 (refused): permission denied", r.code, r.stderr)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.config)
			if tc.config == "" {
				e.writeConfig("")
			}
			e.start()
			check(t, e, tc.mode, tc.gid, tc.otherIn)
			e.writeConfig(tc.reloaded)
			if r := e.lanes("reload"); r.code != 0 {
				t.Fatalf("reload: %d %s", r.code, r.stderr)
			}
			other := cases[1-map[string]int{"unset": 0, "group": 1}[tc.name]]
			check(t, e, other.mode, other.gid, other.otherIn)
			e.stop()
		})
	}
}

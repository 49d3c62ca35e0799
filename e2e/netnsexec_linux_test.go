package e2e

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// lanesd started by `ip netns exec`, which unshares the mount namespace
// and remounts /sys (hiding /sys/fs/cgroup), finds the host's cgroup
// hierarchy through another mount namespace's (PID 1's, or an ancestor's), places processes in the same groups
// a lanesd outside would, says so in doctor, and restores on stop.
func TestStartedByIPNetnsExec(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command")
	}
	e := newEnv(t, "")
	ns := testutil.UniqueName("lanes-e2e")
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	e.startWith([]string{"ip", "netns", "exec", ns, e.bin})
	p := spawn(t, nil, "sleep", "60")
	before := membership(t, p.Process.Pid)
	if r := e.lanes("move", strconv.Itoa(p.Process.Pid), "background"); r.code != 0 {
		t.Fatalf("move: %d %s\n%s", r.code, r.stderr, e.log)
	}
	if got := laneOf(t, p.Process.Pid); got != "lanes-background" {
		t.Errorf("moved process in %q (seen from the host's mounts), want lanes-background", got)
	}
	if r := e.lanes("doctor"); !strings.Contains(r.stdout, "reached through /proc/") {
		t.Errorf("doctor does not say the hierarchy is reached through another process's mounts:\n%s", r.stdout)
	}
	e.stop()
	if got := membership(t, p.Process.Pid); got.V2 != before.V2 || !sameV1(got.V1, before.V1) {
		t.Errorf("after stop: %+v, want %+v", got, before)
	}
	noLanesObjects(t)
}

func sameV1(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

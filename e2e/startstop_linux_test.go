package e2e

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/cgroup"
)

// A SIGTERM that arrives while lanesd is still starting (its groups made,
// its API not yet up) stops it as a SIGTERM later does: exit status 0 and
// the host restored, no lanes group left. Before lanesd caught signals
// from its first step, the signal's default action killed it there.
func TestStopWhileStarting(t *testing.T) {
	e := newEnv(t, "")
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuf{}
	d := exec.Command(e.bin, e.daemonArgs()...)
	d.Env = append(os.Environ(), roleEnv+"=lanesd")
	d.Stdout, d.Stderr = log, log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	exit := make(chan error, 1)
	go func() { exit <- d.Wait() }()
	exited := false
	defer func() {
		if !exited {
			d.Process.Kill()
			<-exit
		}
		if t.Failed() {
			// What a killed start left, from its records.
			c := exec.Command(e.bin, append(e.daemonArgs(), "--cleanup")...)
			c.Env = append(os.Environ(), roleEnv+"=lanesd")
			if out, err := c.CombinedOutput(); err != nil {
				t.Logf("lanesd --cleanup: %v\n%s", err, out)
			}
		}
	}()
	// The first change lanesd logs is a lane's group.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(log.String(), "created cgroup lanes-") {
		if time.Now().After(deadline) {
			t.Fatalf("lanesd made no group within a minute:\n%s", log)
		}
		select {
		case err := <-exit:
			exited = true
			t.Fatalf("lanesd exited at start: %v\n%s", err, log)
		case <-time.After(time.Millisecond):
		}
	}
	if err := d.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalledAt := log.String()
	select {
	case err := <-exit:
		exited = true
		if err != nil {
			t.Fatalf("lanesd exited with %v after SIGTERM at start\n%s", err, log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("lanesd did not stop within 30 s of SIGTERM at start\n%s", log)
	}
	if !strings.Contains(log.String(), "restored the host") {
		t.Errorf("lanesd did not restore the host:\n%s", log)
	}
	for _, lane := range []string{"interactive", "normal", "background"} {
		if h.Group("lanes-" + lane).Exists() {
			t.Errorf("group lanes-%s left behind", lane)
		}
	}
	if strings.Contains(signalledAt, "listening on") {
		t.Logf("lanesd finished starting before the signal arrived: the stop was an ordinary one")
	}
}

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/api"
)

// With [disk.idletime] on a loop device, lanesd holds the background
// lane's reads on that device after foreground reads and lifts the hold a
// PI later: the gate reaches `lanes status` with holds and expiries, and
// stopping lanesd leaves no throttle limit behind.
func TestDiskIdletimeThroughLanesd(t *testing.T) {
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := exec.Command("truncate", "-s", "64M", img).Run(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", "--direct-io=on", img).Output()
	if err != nil {
		// busybox losetup has neither --show nor --direct-io.
		out, err = exec.Command("losetup", "-f").Output()
		if err == nil {
			err = exec.Command("losetup", strings.TrimSpace(string(out)), img).Run()
		}
	}
	if err != nil {
		t.Skipf("no loop device: %v", err)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", loop).Run() })

	e := newEnv(t, "[disk.idletime]\npi = \"100ms\"\ndevices = [\""+loop+"\"]\n")
	e.start()
	start := func(laneName, script string) *exec.Cmd {
		c := exec.Command(e.bin, "--socket", e.socket, "run", "-l", laneName, "--", "bash", "-c", script)
		c.Env = append(os.Environ(), roleEnv+"=lanes")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	// A background reader that keeps the device busy for 5 s, and ten
	// foreground reads 300 ms apart (gaps three times the PI).
	start("background", "end=$((SECONDS+5)); while [ $SECONDS -lt $end ]; do dd if="+loop+" of=/dev/null bs=128k count=256 iflag=direct status=none; done")
	fg := start("normal", "sleep 0.5; for i in $(seq 10); do dd if="+loop+" of=/dev/null bs=4k count=1 skip=$((RANDOM % 16000)) iflag=direct status=none; sleep 0.3; done")
	if err := fg.Wait(); err != nil {
		t.Fatalf("foreground reader: %v", err)
	}
	var st api.Status
	e.lanesJSON(&st, "status")
	var g *api.IdleGate
	for i := range st.Idletime {
		if strings.HasPrefix(st.Idletime[i].Name, "disk ") {
			g = &st.Idletime[i]
		}
	}
	if g == nil {
		t.Fatalf("no disk idletime gate in status: %+v (health %+v)", st.Idletime, st.Health)
	}
	t.Logf("%s: holds %d, preemptions %d, fg at idle %d, expiries %d, reaction %+v, errors %d",
		g.Name, g.Holds, g.Preemptions, g.ForegroundIdle, g.Expiries, g.Reaction, g.Errors)
	if g.Holds < 5 || g.Expiries < 4 || g.Errors != 0 {
		t.Errorf("holds %d, expiries %d, errors %d: want a hold and an expiry per foreground read (10), no errors", g.Holds, g.Expiries, g.Errors)
	}
	e.stop()
	noLanesObjects(t)
}

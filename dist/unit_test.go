package dist

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The unit passes systemd's own checker: every key known, every value
// parsed. The binaries and man pages it names are installed by the
// package, not here, so those paths point at /bin/true for the check.
func TestUnitVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	b, err := os.ReadFile("lanes.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{"Type=notify", "ExecStart=/usr/sbin/lanesd", "ExecReload=/usr/bin/lanes reload", "WatchdogSec=", "Restart=on-failure"} {
		if !strings.Contains(unit, "\n"+want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	var lines []string
	for _, l := range strings.Split(unit, "\n") {
		if strings.HasPrefix(l, "Documentation=") {
			continue
		}
		l = strings.ReplaceAll(l, "/usr/sbin/lanesd", "/bin/true")
		l = strings.ReplaceAll(l, "/usr/bin/lanes", "/bin/true")
		lines = append(lines, l)
	}
	path := filepath.Join(t.TempDir(), "lanes.service")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	var ours []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "lanes.service") {
			ours = append(ours, l)
		}
	}
	if len(ours) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, strings.Join(ours, "\n"))
	}
}

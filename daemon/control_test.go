package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/lane"
)

// A reload whose file has an invalid controller is refused with the
// file, line, key and the expression's position, and changes nothing:
// the running configuration and its controllers stay.
func TestReloadInvalidControllerKeepsRunning(t *testing.T) {
	tests := []struct {
		name, file string
		want       string
	}{
		{"bad handler", `[lanes.video]
[[controller]]
name = "v"
lane = "video"
law = "cel"
handler = '{"cpu.weight": value +}'
[controller.metric]
topic = "app.*.report"
field = "fps"
[controller.target]
value = 20
[[controller.actuator]]
knob = "cpu.weight"
`, `lanes.toml:6: controller[1].handler: "{\"cpu.weight\": value +}": line 1, column 23: Syntax error`},
		{"weight outside the knob", `[lanes.video]
[[controller]]
name = "v"
lane = "video"
kp = 1.0
[controller.metric]
topic = "app.*.report"
field = "fps"
[controller.target]
value = 20
[[controller.actuator]]
knob = "cpu.weight"
max = 50000
`, "lanes.toml:13: controller[1].actuator[1].max: 1..50000 is outside 1..10000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lanes.toml")
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			running := lane.Default()
			run := &controlRun{}
			d := &Daemon{logf: t.Logf, cfg: running, cfgPath: path, health: map[string]api.Health{}, control: run}
			_, err := d.reload()
			if err == nil || !strings.Contains(err.Error(), filepath.Dir(path)) || !strings.Contains(err.Error(), strings.TrimPrefix(tt.want, "lanes.toml")) {
				t.Fatalf("reload error %v, want %q", err, tt.want)
			}
			if d.config() != running || d.control != run {
				t.Error("the failed reload replaced the running config or its controllers")
			}
			if h := d.health["config-invalid"]; !strings.Contains(h.Message, "running config kept") {
				t.Errorf("health %+v", d.health)
			}
		})
	}
}

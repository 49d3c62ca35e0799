package bench

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every shipped scenario parses and its links build.
func TestShippedScenarios(t *testing.T) {
	files, err := filepath.Glob("scenarios/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(s.Arms) < 2 {
			t.Errorf("%s: %d arms, want at least a baseline and lanes", f, len(s.Arms))
		}
		if s.Duration > 30*time.Second {
			t.Errorf("%s: phases of %v: keep scenarios bounded", f, s.Duration)
		}
	}
}

func TestParseErrors(t *testing.T) {
	base := `
name = "t"
[link.up]
rate = "20mbit"
[[workload]]
name = "fg"
role = "foreground"
kind = "iperf3"
[[arm]]
name = "none"
`
	for _, tc := range []struct {
		name, extra, want string
	}{
		{"ok", "", ""},
		{"unknown key", "\n[[arm]]\nname = \"x\"\nsetpu = []\n", "setpu"},
		{"bad role", "\n[[workload]]\nname = \"w\"\nrole = \"boss\"\nkind = \"irtt\"\n", `role "boss"`},
		{"bad kind", "\n[[workload]]\nname = \"w\"\nrole = \"background\"\nkind = \"ftp\"\n", `unknown kind "ftp"`},
		{"duplicate workload", "\n[[workload]]\nname = \"fg\"\nrole = \"background\"\nkind = \"irtt\"\n", `name "fg"`},
		{"wrap unknown workload", "\n[[arm]]\nname = \"l\"\nwrap = { zz = [\"x\"] }\n", `unknown workload "zz"`},
		{"bad namespace", "\n[[arm]]\nname = \"l\"\nsetup = [{ ns = \"host\", cmd = \"true\" }]\n", `namespace "host"`},
		{"bad rate", "\n[link.down]\nrate = \"fast\"\n", `rate "fast"`},
		{"missing trace", "\n[link.down]\ntrace = \"no-such.trace\"\n", "no-such.trace"},
		{"bad duration", "\nduration = \"long\"\n", `duration "long"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Top-level keys must come before the tables.
			src := base + tc.extra
			if strings.HasPrefix(tc.extra, "\nduration") {
				src = tc.extra + base
			}
			_, err := Parse("t.toml", []byte(src))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

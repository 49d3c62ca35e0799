package benchcmd

import (
	"bytes"
	"strings"
	"testing"
)

// `lanes bench gen` is hidden from help and checks its request before
// sending anything.
func TestGen(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no request", []string{"gen"}, "accepts 1 arg"},
		{"not json", []string{"gen", "pulse"}, "generator request"},
		{"unknown field", []string{"gen", `{"kind": "pulse", "speed": 1}`}, "unknown field"},
		{"no duration", []string{"gen", `{"kind": "greedy", "to": "198.18.20.1:5201"}`}, "duration"},
		{"unknown kind", []string{"gen", `{"kind": "ftp", "duration": 1000000}`}, `kind "ftp"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := New()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	var help bytes.Buffer
	cmd := New()
	cmd.SetOut(&help)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(help.String(), "gen") {
		t.Errorf("help lists the hidden gen command:\n%s", help.String())
	}
}

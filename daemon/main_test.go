package daemon

import (
	"bytes"
	"strings"
	"testing"
)

// lanesd's flags refuse values they do not know before anything starts,
// naming the flag.
func TestMainBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-count", "bpf"}, "--metrics-count"},
		{[]string{"--reserve-mechanism", "fifo"}, "--reserve-mechanism"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := Main(tc.args, &out, &errb); code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q does not name %s", errb.String(), tc.want)
			}
		})
	}
}

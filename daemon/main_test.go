package daemon

import (
	"bytes"
	"os"
	"runtime/debug"
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
		{[]string{"--reserve-tick-assist", "10us"}, "--reserve-tick-assist"},
		{[]string{"--reserve-tick-assist", "on"}, "--reserve-tick-assist"},
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

// lanesd's collector settings apply where the environment sets none, each
// on its own, and the environment's win.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tc := range []struct {
		gogc, limit   string
		said          string
		percent       int
		softLimit     int64
		keptPercent   bool
		keptSoftLimit bool
	}{
		{said: "GOGC=400, GOMEMLIMIT=256MiB", percent: 400, softLimit: 256 << 20},
		{gogc: "100", said: "GOMEMLIMIT=256MiB", keptPercent: true, softLimit: 256 << 20},
		{limit: "1GiB", said: "GOGC=400 (", percent: 400, keptSoftLimit: true},
		{gogc: "100", limit: "1GiB", keptPercent: true, keptSoftLimit: true},
	} {
		t.Run(tc.gogc+"/"+tc.limit, func(t *testing.T) {
			// Set, so that the test's end restores them; then unset.
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			os.Unsetenv("GOGC")
			os.Unsetenv("GOMEMLIMIT")
			if tc.gogc != "" {
				t.Setenv("GOGC", tc.gogc)
			}
			if tc.limit != "" {
				t.Setenv("GOMEMLIMIT", tc.limit)
			}
			debug.SetGCPercent(77)
			debug.SetMemoryLimit(123 << 20)
			said := tuneGC()
			if tc.said == "" && said != "" || !strings.HasPrefix(said, tc.said) {
				t.Errorf("tuneGC said %q, want it to begin %q", said, tc.said)
			}
			p := debug.SetGCPercent(77)
			if want := map[bool]int{true: 77, false: tc.percent}[tc.keptPercent]; p != want {
				t.Errorf("GC percent %d, want %d", p, want)
			}
			l := debug.SetMemoryLimit(-1)
			if want := map[bool]int64{true: 123 << 20, false: tc.softLimit}[tc.keptSoftLimit]; l != want {
				t.Errorf("memory limit %d, want %d", l, want)
			}
		})
	}
}

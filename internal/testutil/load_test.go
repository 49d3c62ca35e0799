package testutil

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestPSISome10(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{"some avg10=47.54 avg60=28.15 avg300=23.25 total=2207922734\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 47.54, false},
		{"some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 0, false},
		{"full avg10=3.00 avg60=0.00 avg300=0.00 total=0\n", 0, true},
		{"some avg10=x avg60=0.00\n", 0, true},
		{"", 0, true},
	} {
		got, err := psiSome10(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("psiSome10(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestTooLoaded(t *testing.T) {
	quiet := HostLoad{PSISome10: 47, Load1: 2, CPUs: 2, WakeP99: 5 * time.Millisecond}
	for _, tt := range []struct {
		h    HostLoad
		want string // "" for quiet enough, else a word of the reason
	}{
		{quiet, ""},
		{HostLoad{PSISome10: -1, Load1: 2, CPUs: 2, WakeP99: time.Millisecond}, ""},
		{HostLoad{PSISome10: 95, Load1: 2, CPUs: 2}, "waited for a CPU 95.0%"},
		{HostLoad{PSISome10: 10, Load1: 6.5, CPUs: 2}, "load average 6.50 on 2 CPUs"},
		{HostLoad{PSISome10: 10, Load1: 1, CPUs: 2, WakeP99: 12 * time.Millisecond}, "wake 12ms late"},
	} {
		got := tt.h.tooLoaded()
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%v: tooLoaded %q, want %q", tt.h, got, tt.want)
		}
	}
}

// The host's own figures are read, whatever they are.
func TestReadHostLoad(t *testing.T) {
	h, err := ReadHostLoad()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v", h)
	if h.CPUs < 1 || h.Load1 < 0 || h.WakeP99 < 0 || h.PSISome10 > 100 {
		t.Errorf("implausible host load %+v", h)
	}
}

func TestStealShare(t *testing.T) {
	for _, tt := range []struct {
		name          string
		before, after string
		want          float64
		ok            bool
	}{
		{"a quarter stolen", "cpu  100 0 100 100 0 0 0 100 0 0\ncpu0 1 2 3\n", "cpu  200 0 200 200 0 0 0 200 0 0\n", 25, true},
		{"nothing stolen", "cpu  1 2 3 4 5 6 7 0\n", "cpu  2 3 4 5 6 7 8 0\n", 0, true},
		{"no time passed", "cpu  1 2 3 4 5 6 7 8\n", "cpu  1 2 3 4 5 6 7 8\n", 0, false},
		{"counter went back", "cpu  5 2 3 4 5 6 7 8\n", "cpu  1 2 3 4 5 6 7 9\n", 0, false},
		{"short line", "cpu  1 2 3\n", "cpu  1 2 3\n", 0, false},
		{"not the cpu line", "intr 1 2 3 4 5 6 7 8\n", "intr 1 2 3 4 5 6 7 9\n", 0, false},
	} {
		got, ok := stealShare(tt.before, tt.after)
		if ok != tt.ok || got != tt.want {
			t.Errorf("%s: stealShare = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestStolen(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat here")
	}
	a, ok := Stolen()
	if !ok {
		t.Fatal("Stolen: /proc/stat's steal not read")
	}
	b, ok := Stolen()
	if !ok || b < a || a%(10*time.Millisecond) != 0 {
		t.Errorf("Stolen: %v then %v (%v), want whole 10 ms ticks that do not go back", a, b, ok)
	}
}

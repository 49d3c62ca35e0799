package hostcpu

import "testing"

func TestCountCPUList(t *testing.T) {
	tests := map[string]int{"0": 1, "0-1": 2, "0-3,8,10-11": 7, "": 0}
	for in, want := range tests {
		got, err := countCPUList(in)
		if err != nil || got != want {
			t.Errorf("countCPUList(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"x", "3-1", "1-y"} {
		if _, err := countCPUList(bad); err == nil {
			t.Errorf("countCPUList(%q) succeeded", bad)
		}
	}
}

func TestRTShare(t *testing.T) {
	tests := []struct {
		rt, per int64
		want    float64
		err     bool
	}{
		{950000, 1000000, 0.95, false},
		{-1, 1000000, 1, false},
		{1000000, 1000000, 1, false},
		{0, 1000000, 0, false},
		{5, 0, 0, true},
	}
	for _, tt := range tests {
		got, err := rtShare(tt.rt, tt.per)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("rtShare(%d, %d) = %g, %v; want %g, error %v", tt.rt, tt.per, got, err, tt.want, tt.err)
		}
	}
}

func TestOnline(t *testing.T) {
	if n := Online(); n < 1 {
		t.Fatalf("Online() = %d", n)
	}
}

func TestConfigHz(t *testing.T) {
	tests := []struct {
		cfg  string
		hz   int
		have bool
	}{
		{"CONFIG_HZ_250=y\nCONFIG_HZ=250\n", 250, true},
		{"# CONFIG_HZ_1000 is not set\nCONFIG_HZ=1000", 1000, true},
		{"CONFIG_HZ_PERIODIC=y\n", 0, false},
		{"CONFIG_HZ=x\n", 0, false},
	}
	for _, tt := range tests {
		hz, ok := configHz(tt.cfg)
		if hz != tt.hz || ok != tt.have {
			t.Errorf("configHz(%q) = %d, %v; want %d, %v", tt.cfg, hz, ok, tt.hz, tt.have)
		}
	}
}

func TestHRTickDL(t *testing.T) {
	tests := []struct {
		in      string
		on, err bool
	}{
		{"GENTLE_FAIR_SLEEPERS NO_HRTICK HRTICK_DL DOUBLE_TICK", true, false},
		{"NO_HRTICK NO_HRTICK_DL", false, false},
		{"NO_HRTICK", false, true},
	}
	for _, tt := range tests {
		on, err := hrtickDL(tt.in)
		if on != tt.on || (err != nil) != tt.err {
			t.Errorf("hrtickDL(%q) = %v, %v", tt.in, on, err)
		}
	}
}

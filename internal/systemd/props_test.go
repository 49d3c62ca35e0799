package systemd

import (
	"math"
	"testing"
)

func TestProperties(t *testing.T) {
	type kv = map[string]uint64
	for _, tc := range []struct {
		file, value string
		want        kv
		ok, err     bool
	}{
		{"cpu.weight", "100", kv{"CPUWeight": 100}, true, false},
		{"cpu.weight", "10000", kv{"CPUWeight": 10000}, true, false},
		{"cpu.weight", "0", nil, false, true},
		{"cpu.weight", "10001", nil, false, true},
		{"cpu.weight", "x", nil, false, true},
		{"cpu.idle", "1", kv{"CPUWeight": 0}, true, false},
		{"cpu.idle", "0", nil, false, false},
		{"cpu.idle", "2", nil, false, true},
		{"cpu.max", "max 100000", kv{"CPUQuotaPerSecUSec": math.MaxUint64, "CPUQuotaPeriodUSec": 100000}, true, false},
		{"cpu.max", "50000 100000", kv{"CPUQuotaPerSecUSec": 500000, "CPUQuotaPeriodUSec": 100000}, true, false},
		{"cpu.max", "200000 100000", kv{"CPUQuotaPerSecUSec": 2000000, "CPUQuotaPeriodUSec": 100000}, true, false},
		{"cpu.max", "50000 0", nil, false, true},
		{"cpu.max", "50000", nil, false, true},
		{"io.weight", "default 50", kv{"IOWeight": 50}, true, false},
		{"io.weight", "25", kv{"IOWeight": 25}, true, false},
		{"io.weight", "default 0", nil, false, true},
		{"io.max", "8:0 rbps=1", nil, false, false},
		{"memory.high", "max", nil, false, false},
	} {
		props, ok, err := Properties(tc.file, tc.value)
		if ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("%s=%q: ok %v err %v, want ok %v err %v", tc.file, tc.value, ok, err, tc.ok, tc.err)
			continue
		}
		got := kv{}
		for _, p := range props {
			v, isU64 := p.Value.Value().(uint64)
			if !isU64 {
				t.Errorf("%s=%q: %s is %T, want uint64 (D-Bus type t)", tc.file, tc.value, p.Name, p.Value.Value())
			}
			got[p.Name] = v
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s=%q: %v, want %v", tc.file, tc.value, got, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s=%q: %s = %d, want %d", tc.file, tc.value, k, got[k], v)
			}
		}
	}
}

package diskidle

import (
	"reflect"
	"testing"
)

func TestParseMajMin(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Device
		wantErr bool
	}{
		{"7:0", Device{Major: 7, Minor: 0}, false},
		{" 259:3\n", Device{Major: 259, Minor: 3}, false},
		{"8", Device{}, true},
		{"x:1", Device{}, true},
		{"8:-1", Device{}, true},
		{"4096:0", Device{}, true}, // major has 12 bits
	} {
		got, err := parseMajMin(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseMajMin(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestDeviceNames(t *testing.T) {
	d := Device{Major: 7, Minor: 3, Name: "loop3"}
	if d.kernelDev() != 7<<20|3 || d.MajMin() != "7:3" || d.gateName() != "disk loop3 (7:3)" {
		t.Errorf("%+v: dev %#x, %q, %q", d, d.kernelDev(), d.MajMin(), d.gateName())
	}
	if n := (Device{Major: 8}).gateName(); n != "disk 8:0" {
		t.Errorf("unnamed gate name %q", n)
	}
}

func TestThrottleWrites(t *testing.T) {
	d := Device{Major: 7, Minor: 1}
	for _, tc := range []struct {
		b    throttleBackend
		hold bool
		want []throttleWrite
	}{
		{throttleV1, true, []throttleWrite{{"blkio.throttle.read_bps_device", "7:1 2"}, {"blkio.throttle.write_bps_device", "7:1 2"}}},
		// Released to v1's counting rule, not to none (cgroup.V1AccountBps).
		{throttleV1, false, []throttleWrite{{"blkio.throttle.read_bps_device", "7:1 1125899906842624"}, {"blkio.throttle.write_bps_device", "7:1 1125899906842624"}}},
		{throttleV2, true, []throttleWrite{{"io.max", "7:1 rbps=2 wbps=2"}}},
		{throttleV2, false, []throttleWrite{{"io.max", "7:1 rbps=max wbps=max"}}},
	} {
		if got := throttleWrites(tc.b, d, tc.hold); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("throttleWrites(%v, hold %v) = %v, want %v", tc.b, tc.hold, got, tc.want)
		}
	}
}

func TestLimitLeft(t *testing.T) {
	d := Device{Major: 7, Minor: 1}
	for _, tc := range []struct {
		content string
		want    bool
	}{
		{"", false},
		{"7:1 1\n", true},
		{"7:1 1125899906842624\n", false}, // v1's counting rule
		{"7:10 1\n8:0 5\n", false},
		{"7:1 rbps=1 wbps=max riops=max wiops=max\n", true},
		{"7:1 rbps=max wbps=max riops=5 wiops=max\n", false}, // iops limits are not the hold's
		{"7:1 rbps=max wbps=2\n", true},
	} {
		if got := limitLeft(tc.content, d); got != tc.want {
			t.Errorf("limitLeft(%q) = %v, want %v", tc.content, got, tc.want)
		}
	}
}

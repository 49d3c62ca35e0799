package cgroup

import (
	"reflect"
	"testing"
)

func TestParsePressure(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    Pressure
		wantErr bool
	}{
		{"some and full", "some avg10=1.50 avg60=0.20 avg300=0.00 total=123456\nfull avg10=0.75 avg60=0.00 avg300=0.00 total=789\n",
			Pressure{SomeAvg10: 1.5, SomeTotal: 123456, FullAvg10: 0.75, FullTotal: 789, HaveFull: true}, false},
		{"some only", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", Pressure{}, false},
		{"no some", "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", Pressure{}, true},
		{"bad avg", "some avg10=x avg60=0.00 avg300=0.00 total=0\n", Pressure{}, true},
		{"no total", "some avg10=0.00\n", Pressure{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePressure(tt.text)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseIOStat(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    IOStat
		wantErr bool
	}{
		{"two devices", "254:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n",
			IOStat{ReadBytes: 4097, WriteBytes: 8194, ReadIOs: 4, WriteIOs: 6, Devices: 2}, false},
		{"empty", "", IOStat{}, false},
		{"bad number", "8:0 rbytes=x\n", IOStat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseIOStatV2(tt.text)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseBlkioV1(t *testing.T) {
	tests := []struct {
		name        string
		text        string
		read, write uint64
		devices     int
		wantErr     bool
	}{
		{"two devices", "254:0 Read 100\n254:0 Write 200\n254:0 Sync 300\n254:0 Async 0\n254:0 Discard 0\n254:0 Total 300\n7:0 Read 5\n7:0 Write 0\nTotal 305\n", 105, 200, 2, false},
		{"none", "Total 0\n", 0, 0, 0, false},
		{"bad", "8:0 Read x\n", 0, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, w, n, err := ParseBlkioV1(tt.text)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (r != tt.read || w != tt.write || n != tt.devices) {
				t.Errorf("got %d %d %d, want %d %d %d", r, w, n, tt.read, tt.write, tt.devices)
			}
		})
	}
}

func TestParseKV(t *testing.T) {
	got := parseKV("usage_usec 10\nnr_periods 3\nbogus\nthrottled_usec x\n")
	want := map[string]uint64{"usage_usec": 10, "nr_periods": 3}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

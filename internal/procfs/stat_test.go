package procfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		file    string
		want    Stat
		exiting bool
		exited  bool
		kthread bool
		wantErr string
	}{
		{file: "stat-bash", want: Stat{PID: 4242, Comm: "bash", State: 'S', PPID: 4100, Flags: 4194560, UTime: 7, STime: 5, Threads: 1, StartTime: 1234567}},
		{file: "stat-paren", want: Stat{PID: 5151, Comm: "a) (b", State: 'R', PPID: 4242, Flags: 4194304, UTime: 1, STime: 2, Threads: 1, StartTime: 2345678}},
		{file: "stat-spaces", want: Stat{PID: 6161, Comm: "Web Content", State: 'S', PPID: 1, Flags: 4194560, UTime: 1500, STime: 400, Threads: 27, StartTime: 99999}},
		{file: "stat-zombie", want: Stat{PID: 7171, Comm: ") 1 2 3", State: 'Z', PPID: 4242, Flags: 4227084, Threads: 1, StartTime: 3456789}, exiting: true, exited: true},
		{file: "stat-kthread", want: Stat{PID: 2, Comm: "kthreadd", State: 'S', PPID: 0, Flags: 2129984, STime: 3, Threads: 1, StartTime: 30}, kthread: true},
		{file: "stat-short", wantErr: "21 fields, want at least 22"},
		{file: "stat-noparen", wantErr: "no (command name)"},
		{file: "stat-badppid", wantErr: `field 4 "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseStat(b)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseStat = %+v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ParseStat =\n %+v\nwant\n %+v", got, tt.want)
			}
			if got.Exiting() != tt.exiting || got.Exited() != tt.exited || got.KernelThread() != tt.kthread {
				t.Errorf("exiting/exited/kthread = %v/%v/%v, want %v/%v/%v", got.Exiting(), got.Exited(), got.KernelThread(), tt.exiting, tt.exited, tt.kthread)
			}
			if want := time.Duration(tt.want.UTime+tt.want.STime) * 10 * time.Millisecond; got.CPUTime() != want {
				t.Errorf("CPUTime = %v, want %v", got.CPUTime(), want)
			}
		})
	}
}

func TestParseLastCPU(t *testing.T) {
	for _, tt := range []struct {
		file, wantErr string
		cpu           int
	}{
		{file: "stat-cpu1", cpu: 1},
		{file: "stat-paren", cpu: 0},
		{file: "stat-zombie", cpu: 0},
		{file: "stat-short", wantErr: "want at least 39"},
		{file: "stat-noparen", wantErr: "no (command name)"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			cpu, err := ParseLastCPU(b)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseLastCPU = %d, %v; want an error with %q", cpu, err, tt.wantErr)
				}
				return
			}
			if err != nil || cpu != tt.cpu {
				t.Errorf("ParseLastCPU = %d, %v; want %d", cpu, err, tt.cpu)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		file    string
		want    UIDs
		wantErr string
	}{
		{file: "status-user", want: UIDs{1000, 1000, 1000, 1000}},
		{file: "status-setuid", want: UIDs{Real: 65534, Effective: 0, Saved: 0, FS: 0}},
		{file: "status-nouid", wantErr: "no Uid line"},
		{file: "status-shortuid", wantErr: "want 4 ids"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseStatus(b)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseStatus = %+v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseStatus = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestParsePIDs(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "12 34 ", want: []int{12, 34}},
		{in: "1\n2\n3\n", want: []int{1, 2, 3}},
		{in: "12 x", want: []int{12}, wantErr: true},
		{in: "0", wantErr: true},
		{in: "-3", wantErr: true},
		{in: "99999999999999999999999", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParsePIDs([]byte(tt.in))
		if (err != nil) != tt.wantErr || !equalInts(got, tt.want) {
			t.Errorf("ParsePIDs(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzParseStat(f *testing.F) {
	for _, name := range []string{"stat-bash", "stat-paren", "stat-zombie", "stat-short"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStat(b)
		if err == nil && s.PID <= 0 {
			t.Fatalf("ParseStat(%q) = pid %d without an error", b, s.PID)
		}
	})
}

func TestParseIO(t *testing.T) {
	in := "rchar: 4096\nwchar: 123\nsyscr: 7\nsyscw: 3\nread_bytes: 0\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n"
	if got, want := ParseIO([]byte(in)), (IO{RChar: 4096, WChar: 123, SysCR: 7, SysCW: 3}); got != want {
		t.Errorf("ParseIO = %+v, want %+v", got, want)
	}
	if got := ParseIO([]byte("rchar: x\ngarbage\n")); got != (IO{}) {
		t.Errorf("ParseIO of garbage = %+v, want zero", got)
	}
}

func TestParseSchedstat(t *testing.T) {
	tests := []struct {
		in   string
		want Schedstat
		err  bool
	}{
		{"123456789 987654 42\n", Schedstat{Run: 123456789, Wait: 987654, Slices: 42}, false},
		{"0 0 0", Schedstat{}, false},
		{"1 2\n", Schedstat{}, true},
		{"1 x 3\n", Schedstat{}, true},
		{"", Schedstat{}, true},
	}
	for _, tt := range tests {
		got, err := ParseSchedstat([]byte(tt.in))
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseSchedstat(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestParseCPUIdle(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"cpu  4705 150 1120 1677850 900 0 20 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n", (1677850 + 900) * 10 * time.Millisecond, false},
		{"cpu0 1 2 3 4 5 6\n", 0, true},
		{"cpu 1 2 3\n", 0, true},
		{"cpu 1 2 3 x 5 6\n", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseCPUIdle([]byte(tt.in))
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseCPUIdle(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

package vmlane

import (
	"reflect"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/internal/testutil"
)

func TestPrefixMatchesTestutil(t *testing.T) {
	if missingFeaturePrefix != testutil.MissingFeaturePrefix {
		t.Fatalf("vmlane looks for %q but testutil writes %q", missingFeaturePrefix, testutil.MissingFeaturePrefix)
	}
}

type outcome struct {
	Name    string
	Outcome Outcome
	Reason  string
}

func outcomes(p PackageResult) []outcome {
	var out []outcome
	for _, t := range p.Tests {
		out = append(out, outcome{t.Name, t.Outcome, t.Reason})
	}
	return out
}

func TestParseGoTest(t *testing.T) {
	tests := []struct {
		name string
		out  string
		rc   int
		want []outcome
	}{
		{
			name: "pass skip fail",
			out: `=== RUN   TestA
--- PASS: TestA (0.00s)
=== RUN   TestB
    b_test.go:12: missing kernel feature: qdisc fq_codel (qdisc fq_codel not supported)
--- SKIP: TestB (0.00s)
=== RUN   TestC
    c_test.go:3: got 1, want 2
--- FAIL: TestC (0.01s)
FAIL`,
			rc: 1,
			want: []outcome{
				{"TestA", Pass, ""},
				{"TestB", Skip, "missing kernel feature: qdisc fq_codel (qdisc fq_codel not supported)"},
				{"TestC", Fail, "got 1, want 2"},
			},
		},
		{
			name: "subtests and parallel",
			out: `=== RUN   TestP
=== RUN   TestP/one
=== PAUSE TestP/one
=== RUN   TestP/two
=== PAUSE TestP/two
=== CONT  TestP/one
=== CONT  TestP/two
    p_test.go:9: timing-sensitive assertion not made under emulation
=== NAME  TestP/one
    p_test.go:7: boom
--- FAIL: TestP (0.00s)
    --- FAIL: TestP/one (0.00s)
    --- SKIP: TestP/two (0.00s)
FAIL`,
			rc: 1,
			want: []outcome{
				{"TestP", Fail, "subtest TestP/one failed"},
				{"TestP/one", Fail, "boom"},
				{"TestP/two", Skip, "timing-sensitive assertion not made under emulation"},
			},
		},
		{
			name: "binary died mid-test",
			out: `=== RUN   TestA
--- PASS: TestA (0.00s)
=== RUN   TestHang
panic: test timed out after 1s`,
			rc: 2,
			want: []outcome{
				{"TestA", Pass, ""},
				{"TestHang", Fail, "no result: the test binary ended (exit status 2) while it ran"},
			},
		},
		{
			name: "skip message before cleanup logs",
			out: `=== RUN   TestS
    s_test.go:40: timing-sensitive assertion not made under emulation
    enforcer.go:99: netsched: tc qdisc del dev v-src root
--- SKIP: TestS (0.10s)
=== RUN   TestT
    helper.go:3: setting up
    t_test.go:9: needs a second NIC
    cleanup.go:7: removed
--- SKIP: TestT (0.00s)
=== RUN   TestU
    u_test.go:5: rate 3 Mbit/s, want 5
    enforcer.go:99: netsched: tc qdisc del dev v-src root
--- FAIL: TestU (0.00s)`,
			rc: 0,
			want: []outcome{
				{"TestS", Skip, "timing-sensitive assertion not made under emulation"},
				{"TestT", Skip, "needs a second NIC"},
				{"TestU", Fail, "rate 3 Mbit/s, want 5"},
			},
		},
		{
			name: "no tests",
			out:  "testing: warning: no tests to run\nPASS",
			rc:   0,
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseGoTest("pkg", strings.Split(tt.out, "\n"), tt.rc)
			if !reflect.DeepEqual(outcomes(got), tt.want) {
				t.Errorf("got  %+v\nwant %+v", outcomes(got), tt.want)
			}
			if got.ExitCode != tt.rc {
				t.Errorf("exit code %d, want %d", got.ExitCode, tt.rc)
			}
		})
	}
}

func TestParseConsole(t *testing.T) {
	tests := []struct {
		name     string
		console  string
		pkgs     []string
		rcs      []int
		doctor   []string
		resultRC int
		info     map[string]string
	}{
		{
			name: "two packages, doctor, CRLF and printk",
			console: "VMLANE-INFO kernel 6.1.0-56-amd64\r\n" +
				"[    1.234567] random: crng init done\r\n" +
				"VMLANE-INFO modprobe-failed sch_a\r\nVMLANE-INFO modprobe-failed sch_b\r\n" +
				"VMLANE-BEGIN cpu\r\n=== RUN   TestX\r\n--- PASS: TestX (0.00s)\r\nPASS\r\n\r\nVMLANE-END cpu rc=0 start=1 end=2\r\n" +
				"VMLANE-BEGIN netsched\r\n=== RUN   TestY\r\n--- FAIL: TestY (0.00s)\r\nFAIL\r\nVMLANE-END netsched rc=1\r\n" +
				"VMLANE-DOCTOR-BEGIN\r\ncpu  cgroup v2 cpu.weight\r\nVMLANE-DOCTOR-END rc=0\r\n" +
				"VMLANE-RESULT rc=1\r\n[    5.0] reboot: Power down\r\n",
			pkgs:     []string{"cpu", "netsched"},
			rcs:      []int{0, 1},
			doctor:   []string{"cpu  cgroup v2 cpu.weight"},
			resultRC: 1,
			info:     map[string]string{"kernel": "6.1.0-56-amd64", "modprobe-failed": "sch_a sch_b"},
		},
		{
			name: "guest died inside a binary",
			console: "VMLANE-INFO kernel 7.3.4\n" +
				"VMLANE-BEGIN cpu\n=== RUN   TestX\n",
			pkgs:     []string{"cpu"},
			rcs:      []int{-1},
			resultRC: -1,
			info:     map[string]string{"kernel": "7.3.4"},
		},
		{
			name:     "marker after printk on the same line",
			console:  "VMLANE-BEGIN disk\nPASS\nfoo VMLANE-END disk rc=0\nVMLANE-RESULT rc=0\n",
			pkgs:     []string{"disk"},
			rcs:      []int{0},
			resultRC: 0,
			info:     map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ParseConsole(tt.console)
			var pkgs []string
			var rcs []int
			for _, p := range c.Packages {
				pkgs = append(pkgs, p.Package)
				rcs = append(rcs, p.ExitCode)
			}
			if !reflect.DeepEqual(pkgs, tt.pkgs) || !reflect.DeepEqual(rcs, tt.rcs) {
				t.Errorf("packages %v rcs %v, want %v %v", pkgs, rcs, tt.pkgs, tt.rcs)
			}
			if !reflect.DeepEqual(c.Doctor, tt.doctor) {
				t.Errorf("doctor %q, want %q", c.Doctor, tt.doctor)
			}
			if c.ResultRC != tt.resultRC {
				t.Errorf("result rc %d, want %d", c.ResultRC, tt.resultRC)
			}
			if !reflect.DeepEqual(c.Info, tt.info) {
				t.Errorf("info %v, want %v", c.Info, tt.info)
			}
			for _, l := range c.Lines {
				if strings.Contains(l, "\r") || printkLine.MatchString(l) {
					t.Errorf("line %q kept CR or printk", l)
				}
			}
		})
	}
}

// TestWriteTextShowsFailedOutput checks that the text report carries a
// failed test's own output (the guest, and its log, are gone after the
// run) and not a passing test's.
func TestWriteTextShowsFailedOutput(t *testing.T) {
	p := ParseGoTest("e2e", []string{
		"=== RUN   TestA",
		"    a_test.go:10: lanesd exited with exit status 1",
		"    a_test.go:10: lanesd: stop: remove cgroup: device or resource busy",
		"--- FAIL: TestA (1.00s)",
		"=== RUN   TestB",
		"    b_test.go:3: all good",
		"--- PASS: TestB (0.10s)",
		"FAIL",
	}, 1)
	r := &KernelRun{Kernel: "k", Packages: []PackageResult{p}}
	evaluate(r, nil)
	var b strings.Builder
	WriteText(&b, []*KernelRun{r})
	out := b.String()
	if !strings.Contains(out, "output of e2e TestA") || !strings.Contains(out, "remove cgroup: device or resource busy") {
		t.Errorf("report lacks the failed test's output:\n%s", out)
	}
	if strings.Contains(out, "all good") {
		t.Errorf("report shows a passing test's output:\n%s", out)
	}
}

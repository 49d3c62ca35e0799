package vmlane

import (
	"strings"
	"testing"
)

const sampleConfig = `#
# Automatically generated file; DO NOT EDIT.
CONFIG_NET_SCH_FQ_CODEL=y
CONFIG_NET_SCH_NETEM=m
# CONFIG_NET_SCH_BPF is not set
# CONFIG_SCHED_CLASS_EXT is not set
CONFIG_CGROUP_SCHED=y
CONFIG_IFB=m
CONFIG_LOCALVERSION="-amd64"
`

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig(strings.NewReader(sampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		option  string
		value   string
		enabled bool
	}{
		{"CONFIG_NET_SCH_FQ_CODEL", "y", true},
		{"CONFIG_NET_SCH_NETEM", "m", true},
		{"CONFIG_NET_SCH_BPF", "", false},
		{"CONFIG_LOCALVERSION", "-amd64", false},
		{"CONFIG_NOT_THERE", "", false},
	}
	for _, tt := range tests {
		if cfg[tt.option] != tt.value || cfg.Enabled(tt.option) != tt.enabled {
			t.Errorf("%s = %q enabled %v, want %q %v", tt.option, cfg[tt.option], cfg.Enabled(tt.option), tt.value, tt.enabled)
		}
	}
}

func TestCheckSkip(t *testing.T) {
	cfg, err := ParseConfig(strings.NewReader(sampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	v2 := Facts{Config: cfg, Controllers: []string{"cpu", "io", "memory", "pids"}}
	hybrid := Facts{Config: cfg, Controllers: []string{"hugetlb"}}
	tests := []struct {
		name    string
		reason  string
		facts   Facts
		feature string
		verdict Verdict
	}{
		{"built-in feature skipped is a failure", "missing kernel feature: qdisc fq_codel (not supported)", v2, "qdisc fq_codel", Contradicted},
		{"modular feature skipped is a failure", "missing kernel feature: qdisc netem", v2, "qdisc netem", Contradicted},
		{"unset feature skip is confirmed", "missing kernel feature: bpf qdisc (requires >= Linux 6.16)", v2, "bpf qdisc", Confirmed},
		{"sched_ext absent", "missing kernel feature: sched_ext", v2, "sched_ext", Confirmed},
		{"controller in v2 is a failure", "missing kernel feature: cgroup v2 cpu controller", v2, "cgroup v2 cpu controller", Contradicted},
		{"controller bound to v1 is confirmed", "missing kernel feature: cgroup v2 cpu controller", hybrid, "cgroup v2 cpu controller", Confirmed},
		{"controllers unknown", "missing kernel feature: cgroup v2 cpu controller", Facts{Config: cfg}, "cgroup v2 cpu controller", NoConfig},
		{"unknown name", "missing kernel feature: warp drive", v2, "warp drive", Unchecked},
		{"no config", "missing kernel feature: ifb", Facts{}, "ifb", NoConfig},
		{"not a feature skip", "timing-sensitive assertion not made under emulation", v2, "", NotFeatureSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := CheckSkip(tt.reason, tt.facts)
			if c.Feature != tt.feature || c.Verdict != tt.verdict {
				t.Errorf("CheckSkip(%q) = %+v, want feature %q verdict %q", tt.reason, c, tt.feature, tt.verdict)
			}
		})
	}
}

func TestEvaluateFailsContradictedSkip(t *testing.T) {
	cfg, _ := ParseConfig(strings.NewReader(sampleConfig))
	tests := []struct {
		name     string
		tests    []TestResult
		rc       int
		failures int
	}{
		{"confirmed skip passes", []TestResult{{Name: "T", Outcome: Skip, Reason: "missing kernel feature: bpf qdisc"}}, 0, 0},
		{"contradicted skip fails", []TestResult{{Name: "T", Outcome: Skip, Reason: "missing kernel feature: ifb"}}, 0, 1},
		{"failed test fails", []TestResult{{Name: "T", Outcome: Fail, Reason: "x"}}, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &KernelRun{Facts: Facts{Config: cfg}, Packages: []PackageResult{{Package: "p", ExitCode: tt.rc, Tests: tt.tests}}}
			evaluate(r, nil)
			if len(r.Failures) != tt.failures {
				t.Errorf("failures %q, want %d", r.Failures, tt.failures)
			}
		})
	}
}

package vmlane

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
)

// missingFeaturePrefix is testutil.MissingFeaturePrefix (testutil is for
// tests only; a test checks that the two agree).
const missingFeaturePrefix = "missing kernel feature: "

// featureReq is what a feature needs: kernel config options (each y or
// m) and, for cgroup controllers, that the controller is available in
// the cgroup v2 hierarchy (on a hybrid host it can be bound to v1).
type featureReq struct {
	options    []string
	controller string
}

// featureConfig maps the feature names used with testutil.RequireFeature
// to what provides them.
var featureConfig = map[string]featureReq{
	"qdisc fq_codel":              {options: []string{"CONFIG_NET_SCH_FQ_CODEL"}},
	"qdisc fq":                    {options: []string{"CONFIG_NET_SCH_FQ"}},
	"qdisc netem":                 {options: []string{"CONFIG_NET_SCH_NETEM"}},
	"qdisc htb":                   {options: []string{"CONFIG_NET_SCH_HTB"}},
	"qdisc tbf":                   {options: []string{"CONFIG_NET_SCH_TBF"}},
	"qdisc sfq":                   {options: []string{"CONFIG_NET_SCH_SFQ"}},
	"qdisc prio":                  {options: []string{"CONFIG_NET_SCH_PRIO"}},
	"qdisc cake":                  {options: []string{"CONFIG_NET_SCH_CAKE"}},
	"qdisc ingress":               {options: []string{"CONFIG_NET_SCH_INGRESS"}},
	"qdisc clsact":                {options: []string{"CONFIG_NET_SCH_INGRESS"}},
	"bpf qdisc":                   {options: []string{"CONFIG_NET_SCH_BPF"}},
	"cls_bpf":                     {options: []string{"CONFIG_NET_CLS_BPF"}},
	"cls_u32":                     {options: []string{"CONFIG_NET_CLS_U32"}},
	"act_mirred":                  {options: []string{"CONFIG_NET_ACT_MIRRED"}},
	"ifb":                         {options: []string{"CONFIG_IFB"}},
	"veth":                        {options: []string{"CONFIG_VETH"}},
	"tun":                         {options: []string{"CONFIG_TUN"}},
	"netns":                       {options: []string{"CONFIG_NET_NS"}},
	"sched_ext":                   {options: []string{"CONFIG_SCHED_CLASS_EXT"}},
	"cgroup v2 cpu controller":    {options: []string{"CONFIG_CGROUP_SCHED"}, controller: "cpu"},
	"cgroup v2 io controller":     {options: []string{"CONFIG_BLK_CGROUP"}, controller: "io"},
	"cgroup v2 memory controller": {options: []string{"CONFIG_MEMCG"}, controller: "memory"},
	"cgroup v2 pids controller":   {options: []string{"CONFIG_CGROUP_PIDS"}, controller: "pids"},
	"cpu.max":                     {options: []string{"CONFIG_CFS_BANDWIDTH"}, controller: "cpu"},
	"cpu.idle":                    {options: []string{"CONFIG_FAIR_GROUP_SCHED"}, controller: "cpu"},
	"io.max":                      {options: []string{"CONFIG_BLK_DEV_THROTTLING"}, controller: "io"},
	"io.cost":                     {options: []string{"CONFIG_BLK_CGROUP_IOCOST"}, controller: "io"},
	"bfq":                         {options: []string{"CONFIG_IOSCHED_BFQ"}},
	"cgroup bpf":                  {options: []string{"CONFIG_CGROUP_BPF"}},
	"bpf":                         {options: []string{"CONFIG_BPF_SYSCALL"}},
	"btf":                         {options: []string{"CONFIG_DEBUG_INFO_BTF"}},
	"bpf struct_ops":              {options: []string{"CONFIG_BPF_JIT", "CONFIG_DEBUG_INFO_BTF"}},
	"psi":                         {options: []string{"CONFIG_PSI"}},
	"proc connector":              {options: []string{"CONFIG_PROC_EVENTS"}},
	"bpf procwatch":               {options: []string{"CONFIG_BPF_SYSCALL", "CONFIG_DEBUG_INFO_BTF", "CONFIG_BPF_EVENTS"}},
	"mptcp":                       {options: []string{"CONFIG_MPTCP"}},
	"loop":                        {options: []string{"CONFIG_BLK_DEV_LOOP"}},
	"null_blk":                    {options: []string{"CONFIG_BLK_DEV_NULL_BLK"}},
}

// FeatureNames lists the feature names the checker knows, sorted.
func FeatureNames() []string {
	names := make([]string, 0, len(featureConfig))
	for n := range featureConfig {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// KernelConfig is a parsed kernel .config: option name to value ("y",
// "m", a number or a string). Options that are "is not set" are absent.
type KernelConfig map[string]string

// ParseConfig reads a kernel .config.
func ParseConfig(r io.Reader) (KernelConfig, error) {
	cfg := KernelConfig{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(k, "CONFIG_") {
			continue
		}
		cfg[k] = strings.Trim(v, `"`)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kernel config: %w", err)
	}
	return cfg, nil
}

// ReadConfigFile reads a kernel config, gzip-compressed (/proc/config.gz)
// or plain.
func ReadConfigFile(path string) (KernelConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read kernel config: %w", err)
	}
	var r io.Reader = bytes.NewReader(data)
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("read kernel config %s: %w", path, err)
		}
		r = zr
	}
	cfg, err := ParseConfig(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Enabled reports whether option is built in or a module.
func (c KernelConfig) Enabled(option string) bool {
	v := c[option]
	return v == "y" || v == "m"
}

// Verdict is the check of one "missing kernel feature" skip.
type Verdict string

// The verdicts of the skip checker.
const (
	// Confirmed: the config says the kernel lacks the feature; the skip
	// is right.
	Confirmed Verdict = "confirmed"
	// Contradicted: the config enables the feature, so the skip hides a
	// test that should have run. A failure.
	Contradicted Verdict = "contradicted"
	// Unchecked: the feature name is not in the checker's table.
	Unchecked Verdict = "unchecked"
	// NoConfig: the kernel's config could not be read, so no check was made.
	NoConfig Verdict = "no config"
	// NotFeatureSkip: the skip was not for a missing feature.
	NotFeatureSkip Verdict = ""
)

// SkipCheck is the checker's answer for one skipped test.
type SkipCheck struct {
	Feature string
	Verdict Verdict
	Detail  string // which options were looked at and their values
}

// FeatureOfSkip returns the feature name in a skip message made by
// testutil.RequireFeature, or "" if the message is not such a skip.
func FeatureOfSkip(reason string) string {
	i := strings.Index(reason, missingFeaturePrefix)
	if i < 0 {
		return ""
	}
	name := reason[i+len(missingFeaturePrefix):]
	if j := strings.Index(name, " ("); j >= 0 {
		name = name[:j]
	}
	return strings.TrimSpace(name)
}

// Facts is what is known about a kernel for checking skips: its config
// (nil when unknown) and the controllers its cgroup v2 root offers (nil
// when unknown).
type Facts struct {
	Config      KernelConfig
	Controllers []string
}

// CheckSkip checks a skip message against what the kernel has.
func CheckSkip(reason string, f Facts) SkipCheck {
	name := FeatureOfSkip(reason)
	if name == "" {
		return SkipCheck{Verdict: NotFeatureSkip}
	}
	req, ok := featureConfig[name]
	if !ok {
		return SkipCheck{Feature: name, Verdict: Unchecked, Detail: "feature name not in vmlane's table"}
	}
	if f.Config == nil {
		return SkipCheck{Feature: name, Verdict: NoConfig, Detail: "kernel config not available; check could not be made"}
	}
	var vals []string
	all := true
	for _, o := range req.options {
		v := f.Config[o]
		if v == "" {
			v = "not set"
		}
		vals = append(vals, o+"="+v)
		if !f.Config.Enabled(o) {
			all = false
		}
	}
	if req.controller != "" {
		switch {
		case f.Controllers == nil:
			return SkipCheck{Feature: name, Verdict: NoConfig, Detail: "cgroup v2 controllers unknown; check could not be made"}
		case slices.Contains(f.Controllers, req.controller):
			vals = append(vals, "cgroup v2 offers "+req.controller)
		default:
			vals = append(vals, "cgroup v2 lacks "+req.controller+" (bound to v1 or absent)")
			all = false
		}
	}
	detail := strings.Join(vals, ", ")
	if all {
		return SkipCheck{Feature: name, Verdict: Contradicted, Detail: "the kernel has it: " + detail}
	}
	return SkipCheck{Feature: name, Verdict: Confirmed, Detail: detail}
}

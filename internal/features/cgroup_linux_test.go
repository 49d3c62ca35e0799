package features

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestCgroupControllerProbes checks the probes against the kernel's own
// list of controllers (/proc/cgroups): a controller with a v1 hierarchy
// id is bound to v1, one with id 0 is available to v2. Every answer must
// be conclusive, and exactly one of the two probes must say yes.
func TestCgroupControllerProbes(t *testing.T) {
	b, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		t.Fatal(err)
	}
	hierarchy := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || strings.HasPrefix(f[0], "#") || f[3] != "1" {
			continue
		}
		id, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("parse /proc/cgroups line %q: %v", line, err)
		}
		hierarchy[f[0]] = id
	}
	v2Mounted := hasCgroup2Mount(t)
	checked := 0
	for _, name := range []string{"cpu", "cpuset", "memory", "pids", "hugetlb"} {
		id, ok := hierarchy[name]
		if !ok {
			continue
		}
		v1, v2 := HaveV1Controller(name), HaveCgroupV2Controller(name)
		for _, err := range []error{v1, v2} {
			if err != nil && !errors.Is(err, ErrNotSupported) {
				t.Errorf("%s: inconclusive probe: %v", name, err)
			}
		}
		switch {
		case id > 0 && (v1 != nil || v2 == nil):
			t.Errorf("%s bound to v1 hierarchy %d: HaveV1Controller = %v, HaveCgroupV2Controller = %v", name, id, v1, v2)
		case id == 0 && v2Mounted && (v2 != nil || v1 == nil):
			t.Errorf("%s on cgroup v2: HaveV1Controller = %v, HaveCgroupV2Controller = %v", name, v1, v2)
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("no common controller enabled in /proc/cgroups:\n%s", b)
	}
	for _, f := range []func(string) error{HaveV1Controller, HaveCgroupV2Controller} {
		if err := f("nonesuch"); !errors.Is(err, ErrNotSupported) {
			t.Errorf("probe of controller nonesuch = %v, want ErrNotSupported", err)
		}
	}
}

func hasCgroup2Mount(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), " - cgroup2 ")
}

// TestV1CPUIdle checks the cpu.idle probe against the cpu hierarchy's
// files.
func TestV1CPUIdle(t *testing.T) {
	err := HaveV1CPUIdle()
	if err != nil && !errors.Is(err, ErrNotSupported) {
		t.Fatalf("inconclusive: %v", err)
	}
	if HaveV1Controller("cpu") != nil {
		if err == nil {
			t.Error("HaveV1CPUIdle = nil without a v1 cpu hierarchy")
		}
		return
	}
	h, herr := hierarchy()
	if herr != nil {
		t.Fatal(herr)
	}
	_, statErr := os.Stat(h.CPURoot + "/cpu.idle")
	if (statErr == nil) != (err == nil) {
		t.Errorf("HaveV1CPUIdle = %v but stat cpu.idle = %v", err, statErr)
	}
}

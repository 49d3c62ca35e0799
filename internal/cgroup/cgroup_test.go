package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestDetectAt(t *testing.T) {
	tests := []struct {
		file string
		want Hierarchy
	}{
		{"mountinfo-hybrid-dev.txt", Hierarchy{
			Mode: ModeHybrid, V2Root: "/sys/fs/cgroup/unified",
			CPURoot: "/sys/fs/cgroup/cpu", BlkioRoot: "/sys/fs/cgroup/blkio",
		}},
		{"mountinfo-systemd-v2.txt", Hierarchy{Mode: ModeUnified, V2Root: "/sys/fs/cgroup"}},
		{"mountinfo-v1-only.txt", Hierarchy{
			Mode: ModeV1, CPURoot: "/sys/fs/cgroup/cpu,cpuacct", BlkioRoot: "/sys/fs/cgroup/blkio",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			h, err := DetectAt(string(b))
			if err != nil {
				t.Fatal(err)
			}
			got := Hierarchy{Mode: h.Mode, V2Root: h.V2Root, CPURoot: h.CPURoot, BlkioRoot: h.BlkioRoot}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DetectAt = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDetectAtV1Map(t *testing.T) {
	b, err := os.ReadFile("testdata/mountinfo-v1-only.txt")
	if err != nil {
		t.Fatal(err)
	}
	h, err := DetectAt(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"name=systemd": "/sys/fs/cgroup/systemd",
		"cpu":          "/sys/fs/cgroup/cpu,cpuacct",
		"cpuacct":      "/sys/fs/cgroup/cpu,cpuacct",
		"blkio":        "/sys/fs/cgroup/blkio",
		"memory":       "/sys/fs/cgroup/memory",
		"net_cls":      "/sys/fs/cgroup/net_cls,net_prio",
		"net_prio":     "/sys/fs/cgroup/net_cls,net_prio",
		"pids":         "/sys/fs/cgroup/pids",
	}
	if !reflect.DeepEqual(h.V1, want) {
		t.Errorf("V1 = %v, want %v", h.V1, want)
	}
}

func TestDetectAtErrors(t *testing.T) {
	tests := []struct {
		name, text string
		want       error
	}{
		{"no cgroups", "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n", ErrNoCgroups},
		{"malformed", "27 1 254:0 / / rw,relatime ext4\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DetectAt(tt.text)
			if err == nil {
				t.Fatal("DetectAt succeeded, want an error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	tests := map[string]string{
		`/sys/fs/cgroup`:     "/sys/fs/cgroup",
		`/mnt/with\040space`: "/mnt/with space",
		`/trailing\04`:       `/trailing\04`,
		`/a\134b`:            `/a\b`,
		`/cpu,cpuacct`:       "/cpu,cpuacct",
	}
	for in, want := range tests {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGroupDirs(t *testing.T) {
	tests := []struct {
		name string
		h    Hierarchy
		dirs []string
		cpu  string
		io   string
	}{
		{"hybrid", Hierarchy{Mode: ModeHybrid, V2Root: "/u", CPURoot: "/c", BlkioRoot: "/b"},
			[]string{"/c/lanes-x", "/b/lanes-x", "/u/lanes-x"}, "/c/lanes-x", "/b/lanes-x"},
		{"unified", Hierarchy{Mode: ModeUnified, V2Root: "/cg"},
			[]string{"/cg/lanes-x"}, "/cg/lanes-x", "/cg/lanes-x"},
		{"v1 co-mounted", Hierarchy{Mode: ModeV1, CPURoot: "/cb", BlkioRoot: "/cb"},
			[]string{"/cb/lanes-x"}, "/cb/lanes-x", "/cb/lanes-x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.h.LaneGroup("x")
			if got := g.Dirs(); !slices.Equal(got, tt.dirs) {
				t.Errorf("Dirs = %v, want %v", got, tt.dirs)
			}
			if d, _ := g.Dir(CPU); d != tt.cpu {
				t.Errorf("Dir(cpu) = %q, want %q", d, tt.cpu)
			}
			if d, _ := g.Dir(Blkio); d != tt.io {
				t.Errorf("Dir(blkio) = %q, want %q", d, tt.io)
			}
		})
	}
}

func TestParseMembership(t *testing.T) {
	text := "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/x\n2:cpu,cpuacct:/lanes-bg\n0::/user.slice\n"
	m, err := ParseMembership(text)
	if err != nil {
		t.Fatal(err)
	}
	want := Membership{V2: "/user.slice", V1: map[string]string{
		"name=systemd": "/", "pids": "/", "memory": "/process_api/x", "cpu": "/lanes-bg", "cpuacct": "/lanes-bg",
	}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("ParseMembership = %+v, want %+v", m, want)
	}
	if _, err := ParseMembership("garbage\n"); err == nil {
		t.Error("ParseMembership(garbage) succeeded")
	}
}

func TestUnitNames(t *testing.T) {
	for _, tc := range []struct{ group, slice, scope string }{
		{"lanes-background", "lanes_background.slice", "lanes_background.scope"},
		{"lanes-web-fast", `lanes_web\x2dfast.slice`, `lanes_web\x2dfast.scope`},
		{"lanes-run-12-bg", `lanes_run\x2d12\x2dbg.slice`, `lanes_run\x2d12\x2dbg.scope`},
		{"lanes-a.b", "lanes_a.b.slice", "lanes_a.b.scope"},
		{"lanes-.x", `lanes_\x2ex.slice`, `lanes_\x2ex.scope`},
		{"lanes-ü", `lanes_\xc3\xbc.slice`, `lanes_\xc3\xbc.scope`},
	} {
		if s := SliceUnit(tc.group); s != tc.slice {
			t.Errorf("SliceUnit(%q) = %q, want %q", tc.group, s, tc.slice)
		}
		if s := ScopeUnit(tc.group); s != tc.scope {
			t.Errorf("ScopeUnit(%q) = %q, want %q", tc.group, s, tc.scope)
		}
		if g := GroupOfPath("/" + tc.slice + "/" + tc.scope); g != tc.group {
			t.Errorf("GroupOfPath of %q = %q, want %q", tc.slice, g, tc.group)
		}
	}
	for path, want := range map[string]string{
		"/lanes-bg":                   "lanes-bg",
		"/lanes-bg/sub":               "lanes-bg",
		"lanes-bg":                    "lanes-bg",
		"/user.slice/session-1.scope": "",
		"/":                           "",
		"/lanes_.slice":               "",
		`/lanes_x\x2.slice`:           "",
		`/lanes_x\q41.slice`:          "",
		"/lanes_bg.scope":             "",
		"/lanes.slice/lanes-bg.slice": "",
	} {
		if got := GroupOfPath(path); got != want {
			t.Errorf("GroupOfPath(%q) = %q, want %q", path, got, want)
		}
	}
}

// Under systemd a group is its slice, with the processes in a scope.
func TestGroupUnderSystemd(t *testing.T) {
	h := &Hierarchy{Mode: ModeUnified, V2Root: "/sys/fs/cgroup", Units: noUnits{}}
	g := h.Group("lanes-bg")
	if g.V2Path() != "/sys/fs/cgroup/lanes_bg.slice" || g.MemberPath() != "/lanes_bg.slice/lanes_bg.scope" {
		t.Errorf("v2 %q, members %q", g.V2Path(), g.MemberPath())
	}
	if d, _ := g.Dir(Members); d != "/sys/fs/cgroup/lanes_bg.slice/lanes_bg.scope" {
		t.Errorf("members dir %q", d)
	}
	if slice, scope := g.Units(); slice != "lanes_bg.slice" || scope != "lanes_bg.scope" {
		t.Errorf("units %q %q", slice, scope)
	}
	// Hybrid hosts keep cgroupfs groups whatever Units says.
	hy := &Hierarchy{Mode: ModeHybrid, V2Root: "/sys/fs/cgroup/unified", CPURoot: "/sys/fs/cgroup/cpu", Units: noUnits{}}
	if g := hy.Group("lanes-bg"); g.MemberPath() != "/lanes-bg" || g.V2Path() != "/sys/fs/cgroup/unified/lanes-bg" {
		t.Errorf("hybrid: %q %q", g.MemberPath(), g.V2Path())
	}
}

type noUnits struct{}

func (noUnits) EnsureSlice(string) (bool, error)                   { return false, nil }
func (noUnits) StartScope(string, string, int) error               { return nil }
func (noUnits) Stop(string) error                                  { return nil }
func (noUnits) SetCgroupFile(string, string, string) (bool, error) { return false, nil }

func TestSystemSlices(t *testing.T) {
	for _, tc := range []struct {
		path      string
		slices    []string
		delegated bool
	}{
		{"/system.slice/run-r1.scope", []string{"/system.slice"}, false},
		{"/user.slice/user-1000.slice/session-3.scope", []string{"/user.slice/user-1000.slice", "/user.slice"}, false},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/app-x.scope", []string{"/user.slice/user-1000.slice", "/user.slice"}, true},
		{"/system.slice/docker.service/sub", []string{"/system.slice"}, true},
		{"/system.slice/docker.service", []string{"/system.slice"}, false},
		{"/user.slice/user-1000.slice/user@1000.service/init.scope", []string{"/user.slice/user-1000.slice", "/user.slice"}, true},
		{"/lanes_bg.slice/lanes_bg.scope", []string{"/lanes_bg.slice"}, false},
		{"/init.scope", nil, false},
		{"/", nil, false},
	} {
		got := SystemSlices(tc.path)
		if strings.Join(got, " ") != strings.Join(tc.slices, " ") {
			t.Errorf("SystemSlices(%q) = %q, want %q", tc.path, got, tc.slices)
		}
		// Without the attributes (no such directory): by the path alone.
		h := &Hierarchy{V2Root: "/nonexistent-lanes-test"}
		if d := h.DelegatedUnit(tc.path) != ""; d != tc.delegated {
			t.Errorf("DelegatedUnit(%q) = %q, want delegated %v", tc.path, h.DelegatedUnit(tc.path), tc.delegated)
		}
	}
}

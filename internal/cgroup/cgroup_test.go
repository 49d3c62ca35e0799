package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

package vmlane

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseShow(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		version string
		depends []string
	}{
		{
			name:    "bookworm meta",
			out:     "Package: linux-image-amd64\nVersion: 6.1.192-2\nDepends: linux-image-6.1.0-56-amd64 (= 6.1.192-2)\n",
			version: "6.1.192-2",
			depends: []string{"linux-image-6.1.0-56-amd64"},
		},
		{
			name: "7.x split image",
			out: "Package: linux-image-7.3.4+deb13-amd64\nVersion: 7.3.4-1~bpo13+1\n" +
				"Depends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, linux-base-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1), linux-binary-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1)\n",
			version: "7.3.4-1~bpo13+1",
			depends: []string{"dracut", "linux-base-7.3.4+deb13-amd64", "linux-binary-7.3.4+deb13-amd64"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, d, err := parseShow(tt.out)
			if err != nil || v != tt.version || !reflect.DeepEqual(d, tt.depends) {
				t.Errorf("parseShow = %q %q %v, want %q %q", v, d, err, tt.version, tt.depends)
			}
		})
	}
	if _, _, err := parseShow("N: Unable to locate package x\n"); err == nil {
		t.Error("parseShow without Version: no error")
	}
}

func TestSystemMirrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  Mirrors
	}{
		{
			name: "deb822",
			files: map[string]string{"sources.list.d/debian.sources": "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n\n" +
				"Types: deb\nURIs: http://mirror.example/debian-security/\nSuites: bookworm-security\n"},
			want: Mirrors{"http://mirror.example/debian", "http://mirror.example/debian-security"},
		},
		{
			name:  "one-line with options",
			files: map[string]string{"sources.list": "deb [arch=amd64] https://m.example/debian bookworm main\n# deb http://x/debian sid main\n"},
			want:  Mirrors{"https://m.example/debian", "http://deb.debian.org/debian-security"},
		},
		{
			name:  "nothing usable",
			files: map[string]string{"sources.list.d/x.list": "deb https://packages.cloud.google.com/apt cloud-sdk main\n"},
			want:  Mirrors{"http://deb.debian.org/debian", "http://deb.debian.org/debian-security"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range tt.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := SystemMirrors(dir); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

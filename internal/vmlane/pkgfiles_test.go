package vmlane

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

func TestAddPackageFiles(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		"a.go":                   "package a",
		"a_test.go":              "package a",
		"README.md":              "readme",
		"testdata/x.golden":      "golden",
		"testdata/sub/y.go":      "package ignored // data, kept",
		"scenarios/s1.toml":      "s1",
		"sub/b.go":               "package b",
		"sub/data.txt":           "belongs to sub",
		".hidden/secret":         "no",
		"scenarios/deep/z.trace": "z",
	}
	for name, text := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr := Tree{}
	if err := addPackageFiles(tr, src, "t/a"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for name, e := range tr {
		if e.mode&0o170000 == modeFile {
			got = append(got, name)
		}
	}
	sort.Strings(got)
	want := []string{"t/a/README.md", "t/a/scenarios/deep/z.trace", "t/a/scenarios/s1.toml", "t/a/testdata/sub/y.go", "t/a/testdata/x.golden"}
	if len(got) != len(want) {
		t.Fatalf("copied %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("copied %q, want %q", got, want)
		}
	}
}

func TestAddHostDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "trace.up"), []byte("1\n2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tr := Tree{}
	if err := addHostDir(tr, dir); err != nil {
		t.Fatal(err)
	}
	p := clean(filepath.Join(dir, "sub", "trace.up"))
	e, ok := tr[p]
	if !ok || e.from != filepath.Join(dir, "sub", "trace.up") || e.mode != modeFile|0o644 {
		t.Fatalf("entry %q = %+v (present %v), want a readable copy at the same path", p, e, ok)
	}
	if _, ok := tr[clean(dir)]; !ok {
		t.Errorf("directory %s missing", dir)
	}
}

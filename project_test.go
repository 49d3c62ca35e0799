// Checks on the project as a whole: package docs and dependency rules.
package lanes_test

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every package has exactly one package doc comment, in doc.go.
func TestPackageDocs(t *testing.T) {
	dirs := map[string]bool{}
	filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "clients") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	for dir := range dirs {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		for _, p := range pkgs {
			var withDoc []string
			for name, f := range p.Files {
				if f.Doc != nil && !strings.HasPrefix(f.Doc.Text(), "Code generated") {
					withDoc = append(withDoc, filepath.Base(name))
				}
			}
			switch {
			case len(withDoc) == 0:
				t.Errorf("no package doc in %s", dir)
			case len(withDoc) > 1:
				t.Errorf("several files with a package doc in %s: %v", dir, withDoc)
			case withDoc[0] != "doc.go" && p.Name != "main":
				t.Errorf("package doc of %s is in %s, want doc.go", dir, withDoc[0])
			}
		}
	}
}

// The CLI is a client: it may apply CPU and disk settings for a
// daemon-less `lanes run`, but network enforcement and BPF stay in the
// daemon, and the API types stay free of kernel code.
func TestDependencyRules(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain here (the dependency rules are checked where the code is built)")
	}
	rules := []struct {
		pkg       string
		forbidden []string
	}{
		{"./cmd/lanes/cli", []string{"github.com/vishvananda/netlink", "github.com/cilium/ebpf", "github.com/lanes-qos/lanes/netsched", "github.com/lanes-qos/lanes/daemon"}},
		{"./api", []string{"golang.org/x/sys/unix", "github.com/vishvananda/netlink", "github.com/cilium/ebpf", "github.com/lanes-qos/lanes/enforce"}},
		{"./api/client", []string{"golang.org/x/sys/unix", "github.com/vishvananda/netlink", "github.com/cilium/ebpf", "github.com/lanes-qos/lanes/enforce"}},
		{"./lane", []string{"golang.org/x/sys/unix", "github.com/vishvananda/netlink", "github.com/cilium/ebpf", "github.com/lanes-qos/lanes/internal/cgroup"}},
	}
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", "-json=ImportPath", r.pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", r.pkg, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		deps := map[string]bool{}
		for dec.More() {
			var p struct{ ImportPath string }
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			deps[p.ImportPath] = true
		}
		for _, f := range r.forbidden {
			if deps[f] {
				t.Errorf("%s depends on %s", r.pkg, f)
			}
		}
	}
}

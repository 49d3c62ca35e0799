package vmlane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Package is a package of the module with tests.
type Package struct {
	ImportPath string
	Rel        string // relative to the module root, "." for the root
	Dir        string
	Privileged bool // its tests import internal/testutil
}

// ListPackages lists the packages matching patterns (relative to root)
// that have tests.
func ListPackages(ctx context.Context, root string, patterns []string) ([]Package, error) {
	modOut, err := goCmd(ctx, root, nil, "list", "-m")
	if err != nil {
		return nil, err
	}
	module := strings.TrimSpace(modOut)
	args := append([]string{"list", "-f",
		`{{.ImportPath}}	{{.Dir}}	{{len .TestGoFiles}}	{{len .XTestGoFiles}}	{{join .TestImports ","}},{{join .XTestImports ","}}`},
		patterns...)
	out, err := goCmd(ctx, root, nil, args...)
	if err != nil {
		return nil, err
	}
	testutil := module + "/internal/testutil"
	var pkgs []Package
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 || (f[2] == "0" && f[3] == "0") {
			continue
		}
		rel, err := filepath.Rel(root, f[1])
		if err != nil {
			return nil, fmt.Errorf("package %s: %w", f[0], err)
		}
		pkgs = append(pkgs, Package{
			ImportPath: f[0], Rel: filepath.ToSlash(rel), Dir: f[1],
			Privileged: slices.Contains(strings.Split(f[4], ","), testutil),
		})
	}
	return pkgs, nil
}

// BuildTests builds each package's tests as a static binary in out.
// A package that does not build is returned in failed with the error.
func BuildTests(ctx context.Context, root string, pkgs []Package, out string) (bins []Binary, failed map[string]error, err error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, nil, fmt.Errorf("build tests: %w", err)
	}
	failed = map[string]error{}
	built := make([]*Binary, len(pkgs))
	errs := make([]error, len(pkgs))
	// Two builds at once: linking dominates and is single-threaded.
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, p := range pkgs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			name := strings.ReplaceAll(p.Rel, "/", "_")
			if name == "." {
				name = "root"
			}
			bin := filepath.Join(out, name+".test")
			os.Remove(bin)
			if _, err := goCmd(ctx, root, []string{"CGO_ENABLED=0"}, "test", "-c", "-ldflags=-s -w", "-o", bin, "./"+p.Rel); err != nil {
				errs[i] = err
				return
			}
			if _, err := os.Stat(bin); err != nil {
				errs[i] = fmt.Errorf("go test -c wrote no binary (no tests?): %w", err)
				return
			}
			built[i] = &Binary{Package: p.Rel, Path: bin, Dir: p.Dir}
		}()
	}
	wg.Wait()
	for i, p := range pkgs {
		switch {
		case errs[i] != nil:
			failed[p.Rel] = errs[i]
		case built[i] != nil:
			bins = append(bins, *built[i])
		}
	}
	return bins, failed, nil
}

// BuildLanes builds the lanes CLI (./cmd/lanes) statically for `lanes
// doctor`. It returns "" and a reason when there is no such command yet.
func BuildLanes(ctx context.Context, root, out string) (string, error) {
	name, err := goCmd(ctx, root, nil, "list", "-f", "{{.Name}}", "./cmd/lanes")
	if err != nil || strings.TrimSpace(name) != "main" {
		return "", fmt.Errorf("no main package in ./cmd/lanes yet")
	}
	bin := filepath.Join(out, "lanes")
	if _, err := goCmd(ctx, root, []string{"CGO_ENABLED=0"}, "build", "-ldflags=-s -w", "-o", bin, "./cmd/lanes"); err != nil {
		return "", err
	}
	return bin, nil
}

func goCmd(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = lastLines(string(ee.Stderr), 8)
		}
		return string(out), fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	return string(out), nil
}

// BuildDeb builds the lanes Debian package with the checkout's own
// dist/deb into out and returns its path.
func BuildDeb(ctx context.Context, root, out string) (string, error) {
	script := filepath.Join(root, "dist", "deb")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("lanes .deb: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("lanes .deb: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("dist/deb %s: %w: %s", out, err, lastLines(string(b), 8))
	}
	debs, _ := filepath.Glob(filepath.Join(out, "lanes_*.deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("dist/deb %s: wrote %d lanes_*.deb files, want 1", out, len(debs))
	}
	return debs[0], nil
}

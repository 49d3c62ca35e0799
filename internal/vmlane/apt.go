package vmlane

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// KernelSpec says which Debian kernel one column of the matrix uses: the
// amd64 flavour that the mirror's linux-image-amd64 points at, in the
// first suite group whose kernel release Want accepts.
type KernelSpec struct {
	Name   string     // "bookworm", "7x"
	Groups [][]string // suite groups tried in order, e.g. {{"trixie-backports"}, {"sid"}}
	Want   func(release string) bool
}

// Specs are the kernels the matrix knows, by name.
var Specs = map[string]KernelSpec{
	"bookworm": {
		Name:   "bookworm",
		Groups: [][]string{{"bookworm", "bookworm-updates", "bookworm-security"}},
		Want:   func(r string) bool { return strings.HasPrefix(r, "6.1.") },
	},
	"7x": {
		Name:   "7x",
		Groups: [][]string{{"trixie-backports"}, {"sid"}},
		Want:   func(r string) bool { return strings.HasPrefix(r, "7.") },
	},
}

// Kernel is a resolved, downloaded and unpacked Debian kernel.
type Kernel struct {
	Name       string   // the spec's name
	Suite      string   // the suite it came from
	Release    string   // uname -r, e.g. 6.1.0-56-amd64
	Version    string   // Debian package version
	Packages   []string // the .deb packages it was unpacked from
	Root       string   // where the packages are unpacked
	Vmlinuz    string   // the bzImage
	ConfigPath string
	ModulesDir string // .../lib/modules/<release>
}

// Mirrors are the Debian archive and security mirror URIs.
type Mirrors struct {
	Debian   string
	Security string
}

// SystemMirrors reads the mirrors the machine's apt already uses from
// /etc/apt/sources.list and sources.list.d (one-line and deb822 forms),
// falling back to deb.debian.org.
func SystemMirrors(etcApt string) Mirrors {
	m := Mirrors{Debian: "http://deb.debian.org/debian", Security: "http://deb.debian.org/debian-security"}
	files, _ := filepath.Glob(filepath.Join(etcApt, "sources.list.d", "*"))
	files = append([]string{filepath.Join(etcApt, "sources.list")}, files...)
	var debian, security string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, uri := range sourceURIs(string(data)) {
			u := strings.TrimRight(uri, "/")
			switch {
			case security == "" && strings.HasSuffix(u, "/debian-security"):
				security = u
			case debian == "" && strings.HasSuffix(u, "/debian"):
				debian = u
			}
		}
	}
	if debian != "" {
		m.Debian = debian
	}
	if security != "" {
		m.Security = security
	}
	return m
}

var debLine = regexp.MustCompile(`^deb\s+(?:\[[^\]]*\]\s+)?(\S+)`)

func sourceURIs(text string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := debLine.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
		if v, ok := strings.CutPrefix(line, "URIs:"); ok {
			out = append(out, strings.Fields(v)...)
		}
	}
	return out
}

// aptState is a private apt configuration and state under dir, so that
// other suites can be read without touching the system's apt.
type aptState struct {
	dir  string
	logf func(format string, args ...any)
}

func (a aptState) opts() []string {
	return []string{
		"-o", "Dir::Etc::SourceList=" + filepath.Join(a.dir, "sources.list"),
		"-o", "Dir::Etc::SourceParts=" + filepath.Join(a.dir, "sources.list.d"),
		"-o", "Dir::State::Lists=" + filepath.Join(a.dir, "lists"),
		"-o", "Dir::Cache=" + filepath.Join(a.dir, "cache"),
		"-o", "Dir::State::status=" + filepath.Join(a.dir, "status"),
		"-o", "APT::Sandbox::User=root",
		"-o", "Debug::NoLocking=1",
		"-o", "Acquire::Languages=none",
		"-q",
	}
}

func (a aptState) setup(m Mirrors, suites []string) error {
	for _, d := range []string{"lists/partial", "cache/archives/partial", "sources.list.d"} {
		if err := os.MkdirAll(filepath.Join(a.dir, d), 0o755); err != nil {
			return fmt.Errorf("apt state: %w", err)
		}
	}
	var b strings.Builder
	for _, s := range suites {
		uri := m.Debian
		if strings.HasSuffix(s, "-security") {
			uri = m.Security
		}
		fmt.Fprintf(&b, "deb %s %s main\n", uri, s)
	}
	if err := os.WriteFile(filepath.Join(a.dir, "sources.list"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("apt state: %w", err)
	}
	status := filepath.Join(a.dir, "status")
	if _, err := os.Stat(status); err != nil {
		if err := os.WriteFile(status, nil, 0o644); err != nil {
			return fmt.Errorf("apt state: %w", err)
		}
	}
	return nil
}

func (a aptState) run(ctx context.Context, dir, tool string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, tool, append(a.opts(), args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return string(out), nil
}

// show returns the candidate version and the package names of the
// Depends of pkg (first alternative of each).
func (a aptState) show(ctx context.Context, pkg string) (version string, depends []string, err error) {
	out, err := a.run(ctx, "", "apt-cache", "show", "--no-all-versions", pkg)
	if err != nil {
		return "", nil, err
	}
	return parseShow(out)
}

func parseShow(out string) (version string, depends []string, err error) {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "Version: "); ok && version == "" {
			version = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Depends: "); ok && depends == nil {
			for _, d := range strings.Split(v, ",") {
				alt, _, _ := strings.Cut(d, "|")
				f := strings.Fields(alt)
				if len(f) > 0 {
					depends = append(depends, f[0])
				}
			}
		}
	}
	if version == "" {
		return "", nil, errors.New("apt-cache show: no Version field")
	}
	return version, depends, nil
}

var imagePkg = regexp.MustCompile(`^linux-image-(\d[^ ]*)$`)

// resolved is what Resolve found, kept so that a run without network can
// reuse the last answer.
type resolved struct {
	Suite    string
	Release  string
	Version  string
	Packages []string
}

// Resolve finds the kernel of spec that the mirror carries today,
// downloads its packages (never installs them) and unpacks them under
// cache, keyed by package version. When the mirror cannot be reached it
// falls back to the last kernel resolved for spec.
func Resolve(ctx context.Context, spec KernelSpec, m Mirrors, cache string, logf func(string, ...any)) (*Kernel, error) {
	start := time.Now()
	last := filepath.Join(cache, "resolved-"+spec.Name+".json")
	r, err := resolveOnline(ctx, spec, m, cache, logf)
	if err != nil {
		data, rerr := os.ReadFile(last)
		if rerr != nil {
			return nil, fmt.Errorf("resolve kernel %s: %w", spec.Name, err)
		}
		r = &resolved{}
		if jerr := json.Unmarshal(data, r); jerr != nil {
			return nil, fmt.Errorf("resolve kernel %s: %w (and cached answer unreadable: %v)", spec.Name, err, jerr)
		}
		logf("%s: mirror unreachable (%v); using the last resolved kernel %s", spec.Name, err, r.Release)
	} else if data, err := json.Marshal(r); err == nil {
		_ = os.WriteFile(last, data, 0o644)
	}
	logf("%s: %s %s from %s (resolved in %.1fs)", spec.Name, r.Release, r.Version, r.Suite, time.Since(start).Seconds())
	k, err := fetchAndUnpack(ctx, spec, r, m, cache, logf)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w", spec.Name, err)
	}
	return k, nil
}

func aptFor(cache string, suites []string, logf func(string, ...any)) aptState {
	return aptState{dir: filepath.Join(cache, "apt", strings.Join(suites, "+")), logf: logf}
}

func resolveOnline(ctx context.Context, spec KernelSpec, m Mirrors, cache string, logf func(string, ...any)) (*resolved, error) {
	var tried []string
	for _, suites := range spec.Groups {
		a := aptFor(cache, suites, logf)
		if err := a.setup(m, suites); err != nil {
			return nil, err
		}
		t := time.Now()
		if _, err := a.run(ctx, "", "apt-get", "update"); err != nil {
			return nil, err
		}
		logf("%s: apt-get update %s: %.1fs", spec.Name, strings.Join(suites, " "), time.Since(t).Seconds())
		_, deps, err := a.show(ctx, "linux-image-amd64")
		if err != nil {
			return nil, err
		}
		release := ""
		for _, d := range deps {
			if mm := imagePkg.FindStringSubmatch(d); mm != nil {
				release = mm[1]
			}
		}
		if release == "" || !spec.Want(release) {
			tried = append(tried, fmt.Sprintf("%s has %q", suites[0], release))
			continue
		}
		image := "linux-image-" + release
		version, imageDeps, err := a.show(ctx, image)
		if err != nil {
			return nil, err
		}
		pkgs := []string{image}
		for _, d := range imageDeps {
			for _, part := range []string{"linux-binary-", "linux-modules-", "linux-base-"} {
				if d == part+release {
					pkgs = append(pkgs, d)
				}
			}
		}
		return &resolved{Suite: suites[0], Release: release, Version: version, Packages: pkgs}, nil
	}
	return nil, fmt.Errorf("no suite carries a wanted kernel: %s", strings.Join(tried, "; "))
}

func fetchAndUnpack(ctx context.Context, spec KernelSpec, r *resolved, m Mirrors, cache string, logf func(string, ...any)) (*Kernel, error) {
	key := r.Release + "_" + strings.NewReplacer(":", "%3a", "/", "_").Replace(r.Version)
	kdir := filepath.Join(cache, "kernels", key)
	root := filepath.Join(kdir, "root")
	done := filepath.Join(kdir, "unpacked")
	if _, err := os.Stat(done); err != nil {
		debs := filepath.Join(cache, "debs")
		if err := os.MkdirAll(debs, 0o755); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		var group []string
		for _, g := range spec.Groups {
			if g[0] == r.Suite {
				group = g
			}
		}
		a := aptFor(cache, group, logf)
		if err := os.RemoveAll(kdir); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		for _, p := range r.Packages {
			deb, err := download(ctx, a, debs, p, r.Version, spec.Name, logf)
			if err != nil {
				return nil, err
			}
			t := time.Now()
			if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("dpkg-deb -x %s: %w: %s", deb, err, lastLines(string(out), 5))
			}
			logf("%s: unpacked %s in %.1fs", spec.Name, filepath.Base(deb), time.Since(t).Seconds())
		}
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
	}
	k := &Kernel{Name: spec.Name, Suite: r.Suite, Release: r.Release, Version: r.Version, Packages: r.Packages, Root: root}
	k.Vmlinuz = firstExisting(filepath.Join(root, "boot", "vmlinuz-"+r.Release), filepath.Join(root, "usr/lib/modules", r.Release, "vmlinuz"))
	k.ConfigPath = firstExisting(filepath.Join(root, "boot", "config-"+r.Release), filepath.Join(root, "usr/lib/modules", r.Release, "config"))
	k.ModulesDir = firstExisting(filepath.Join(root, "lib/modules", r.Release), filepath.Join(root, "usr/lib/modules", r.Release))
	if k.Vmlinuz == "" || k.ModulesDir == "" {
		return nil, fmt.Errorf("unpacked %s has no vmlinuz or modules directory under %s", r.Release, root)
	}
	return k, nil
}

func download(ctx context.Context, a aptState, debs, pkg, version, name string, logf func(string, ...any)) (string, error) {
	file := filepath.Join(debs, pkg+"_"+strings.ReplaceAll(version, ":", "%3a")+"_amd64.deb")
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	t := time.Now()
	if _, err := a.run(ctx, debs, "apt-get", "download", pkg+"="+version); err != nil {
		return "", err
	}
	st, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("apt-get download %s: %w", pkg, err)
	}
	logf("%s: downloaded %s (%.1f MB) in %.1fs", name, filepath.Base(file), float64(st.Size())/1e6, time.Since(t).Seconds())
	return file, nil
}

func firstExisting(paths ...string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

package vmlane

import (
	"bytes"
	"context"
	"debug/elf"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

//go:embed guest_init.sh
var guestInit []byte

// DefaultModules are the modules the privileged tests need. Those that a
// kernel builds in, or lacks, are reported and not loaded.
var DefaultModules = []string{
	"sch_htb", "sch_tbf", "sch_ingress", "sch_prio", "sch_sfq",
	"sch_fq_codel", "sch_netem", "sch_fq", "sch_cake",
	"cls_u32", "cls_bpf", "cls_fw", "cls_matchall",
	"act_mirred", "act_bpf", "act_gact", "act_skbedit",
	"ifb", "veth", "tun", "dummy", "loop", "null_blk", "bfq",
	// vishvananda/netlink's handles open XFRM and netfilter sockets too;
	// a user's machine autoloads these on first use.
	"xfrm_user", "nfnetlink",
	// ss reads sockets' details (their congestion control) through
	// sock_diag, and lanesd's boosting its sockets' counters; without
	// these ss falls back to /proc/net/tcp and lanesd to /proc/PID/io.
	"inet_diag", "tcp_diag", "udp_diag",
	// lanes proxy's transparent mode: nftables NAT redirect rules and the
	// connection tracking SO_ORIGINAL_DST reads.
	// (libcrc32c, which they depend on, asks for a crc32c implementation
	// by alias at load: busybox modprobe resolves no aliases.)
	"crc32c_generic", "nf_tables", "nft_chain_nat", "nft_redir", "nf_nat", "nf_conntrack",
}

// DefaultTools are host programs copied into the guest with their shared
// libraries; the optional ones only when the host has them.
var (
	DefaultTools  = []string{"ip", "tc", "ss"}
	OptionalTools = []string{
		"dash", "bash", "ethtool", "iperf3", "bpftool", "irtt", "fio", "stress-ng", "useradd", "userdel", "curl",
		// Busybox applets that run other programs prefer busybox's own
		// applets over PATH (busybox nsenter ... tc runs busybox tc):
		// the real ones look in PATH.
		"nsenter", "unshare", "chrt", "taskset", "ionice", "nice", "timeout", "env", "xargs", "setpriv",
	}
)

// Binary is a test binary built for one package.
type Binary struct {
	Package string // relative to the module root, e.g. "netsched" or "." for the root
	Path    string // the built binary on the host
	Dir     string // the package's source directory (for testdata)
}

// Guest describes what goes into an initramfs.
type Guest struct {
	Busybox  string   // static busybox on the host
	Tools    []string // host programs to copy (found in PATH)
	Binaries []Binary
	Lanes    string   // static lanes CLI, or "" when it is not built
	Modules  []string // wanted module names
	TestArgs []string // extra arguments for every test binary
	HostDirs []string // host directories copied to the same path in the guest
}

// ModuleReport says what happened to each wanted module for one kernel.
type ModuleReport struct {
	Loaded  []string // shipped as .ko (with their dependencies)
	Builtin []string
	Missing []string
}

// BuildInitramfs writes the guest's initramfs for kernel k to out.
// scratch is a directory for decompressed modules.
func BuildInitramfs(ctx context.Context, g Guest, k *Kernel, scratch, out string) (ModuleReport, int64, error) {
	t := Tree{}
	if err := checkStatic(g.Busybox); err != nil {
		return ModuleReport{}, 0, fmt.Errorf("busybox %s: %w (install busybox-static: lanes-vmlane --install)", g.Busybox, err)
	}
	t.Copy("bin/busybox", 0o755, g.Busybox)
	toolNames := map[string]bool{}
	for _, tool := range g.Tools {
		toolNames[filepath.Base(tool)] = true
	}
	applets, err := exec.CommandContext(ctx, g.Busybox, "--list-full").Output()
	if err != nil {
		return ModuleReport{}, 0, fmt.Errorf("busybox --list-full: %w", err)
	}
	for _, a := range strings.Fields(string(applets)) {
		base := path.Base(a)
		if base == "busybox" || toolNames[base] {
			continue // a link over busybox itself loops (ELOOP)
		}
		t.Symlink(a, "/bin/busybox")
	}
	for _, tool := range g.Tools {
		if err := addTool(ctx, t, tool); err != nil {
			return ModuleReport{}, 0, err
		}
		if filepath.Base(tool) == "dash" {
			// Busybox ash runs its own applets before PATH, so `sh -c "tc
			// ..."` would get busybox's tc; dash looks in PATH.
			t.Symlink("bin/sh", "/usr/sbin/dash")
		}
	}
	t.File("init", 0o755, guestInit)
	t.CharDev("dev/console", 5, 1)
	t.CharDev("dev/null", 1, 3)
	for _, d := range []string{"proc", "sys", "run", "tmp", "root", "mnt"} {
		t.Dir(d)
	}
	t.Symlink("var/run", "../run")
	t.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	t.File("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	t.File("etc/hosts", 0o644, []byte("127.0.0.1 localhost\n::1 localhost\n"))
	t.File("etc/shadow", 0o640, []byte("root:*:19000:0:99999:7:::\n"))
	t.File("etc/gshadow", 0o640, []byte("root:*::\n"))
	if _, err := os.Stat("/etc/login.defs"); err == nil { // for useradd
		t.Copy("etc/login.defs", 0o644, "/etc/login.defs")
	}

	rep, err := addModules(ctx, t, k, g.Modules, scratch)
	if err != nil {
		return rep, 0, err
	}

	if err := addTests(t, g); err != nil {
		return rep, 0, err
	}
	n, err := writeCpioFile(t, out)
	return rep, n, err
}

// addTests places what every guest runs: each test binary in a copy of
// its package directory under /t (with its testdata), their list in
// /etc/vmlane/tests (package, directory, binary; tab-separated), the
// arguments for every binary in /etc/vmlane/testargs, the host
// directories the tests read, and the lanes CLI as
// /usr/local/bin/lanes.
func addTests(t Tree, g Guest) error {
	var list strings.Builder
	for _, b := range g.Binaries {
		dir := path.Join("t", b.Package)
		name := path.Base(b.Path)
		t.Copy(path.Join(dir, name), 0o755, b.Path)
		if err := addPackageFiles(t, b.Dir, dir); err != nil {
			return err
		}
		fmt.Fprintf(&list, "%s\t/%s\t%s\n", b.Package, dir, name)
	}
	t.File("etc/vmlane/tests", 0o644, []byte(list.String()))
	t.File("etc/vmlane/testargs", 0o644, []byte(strings.Join(g.TestArgs, "\n")+"\n"))
	for _, d := range g.HostDirs {
		if err := addHostDir(t, d); err != nil {
			return err
		}
	}
	if g.Lanes != "" {
		t.Copy("usr/local/bin/lanes", 0o755, g.Lanes)
	}
	return nil
}

// writeCpioFile writes t as a cpio archive to out and returns its size.
func writeCpioFile(t Tree, out string) (int64, error) {
	f, err := os.Create(out)
	if err != nil {
		return 0, fmt.Errorf("initramfs: %w", err)
	}
	n, err := t.WriteCpio(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("initramfs: %w", cerr)
	}
	return n, err
}

func checkStatic(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return errors.New("not statically linked")
		}
	}
	return nil
}

var lddPath = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// addTool copies a host program and its ldd closure to the same paths.
func addTool(ctx context.Context, t Tree, tool string) error {
	p, err := exec.LookPath(tool)
	if err != nil {
		return fmt.Errorf("host tool %s: %w", tool, err)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("host tool %s: %w", tool, err)
	}
	t.Copy(path.Join("usr/sbin", filepath.Base(p)), 0o755, real)
	if checkStatic(real) == nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, "ldd", real).Output()
	if err != nil {
		return fmt.Errorf("ldd %s: %w", real, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		m := lddPath.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		lib, err := filepath.EvalSymlinks(m[1])
		if err != nil {
			return fmt.Errorf("library %s of %s: %w", m[1], tool, err)
		}
		t.Copy(m[1], 0o755, lib)
	}
	return nil
}

// addPackageFiles copies what a package's tests may open relative to
// their directory: testdata/ whole, and the package's other non-Go files
// and data directories (those without Go files, which would be other
// packages). Files over 16 MB are left out.
func addPackageFiles(t Tree, srcDir, dstDir string) error {
	const maxFile = 16 << 20
	return filepath.WalkDir(srcDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(srcDir, p)
		if err != nil {
			return err
		}
		inTestdata := rel == "testdata" || strings.HasPrefix(rel, "testdata"+string(filepath.Separator))
		dst := path.Join(dstDir, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			if rel == "." || inTestdata {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || hasGoFiles(p) {
				return filepath.SkipDir
			}
			t.Dir(dst)
		case !inTestdata && strings.HasSuffix(p, ".go"):
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			t.Symlink(dst, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			if info.Size() <= maxFile {
				t.Copy(dst, uint32(info.Mode().Perm()), p)
			}
		}
		return nil
	})
}

// addHostDir copies a host directory's regular files to the same path.
func addHostDir(t Tree, dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("host dir: %w", err)
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("host dir %s: %w", dir, err)
		}
		switch {
		case d.IsDir():
			t.Dir(p)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			t.Copy(p, uint32(info.Mode().Perm())|0o444, p)
		}
		return nil
	})
}

func hasGoFiles(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return len(m) > 0
}

var moduleExt = regexp.MustCompile(`\.ko(\.xz|\.zst|\.gz)?$`)

func modName(file string) string {
	return strings.ReplaceAll(moduleExt.ReplaceAllString(path.Base(file), ""), "-", "_")
}

// addModules ships the wanted modules that k builds as modules, with
// their dependencies, decompressed (busybox cannot read .ko.zst), and a
// modules.dep for busybox modprobe; the init loads them in order.
func addModules(ctx context.Context, t Tree, k *Kernel, want []string, scratch string) (ModuleReport, error) {
	var rep ModuleReport
	files, builtin, err := scanModules(k) // module name -> path relative to ModulesDir
	if err != nil {
		return rep, err
	}
	deps := map[string][]string{}
	var order []string
	var visit func(name string) error
	visit = func(name string) error {
		if _, done := deps[name]; done {
			return nil
		}
		rel := files[name]
		plain := filepath.Join(scratch, k.Release, moduleExt.ReplaceAllString(rel, ".ko"))
		if err := decompressModule(ctx, filepath.Join(k.ModulesDir, rel), plain); err != nil {
			return err
		}
		d, err := moduleDepends(plain)
		if err != nil {
			return fmt.Errorf("module %s: %w", name, err)
		}
		deps[name] = d
		for _, dep := range d {
			if _, ok := files[dep]; !ok {
				continue // built in
			}
			if err := visit(dep); err != nil {
				return err
			}
		}
		order = append(order, name)
		modDir := path.Join("lib/modules", k.Release)
		t.Copy(path.Join(modDir, filepath.ToSlash(moduleExt.ReplaceAllString(rel, ".ko"))), 0o644, plain)
		return nil
	}
	for _, w := range want {
		switch {
		case files[w] != "":
			if err := visit(w); err != nil {
				return rep, err
			}
			rep.Loaded = append(rep.Loaded, w)
		case builtin[w]:
			rep.Builtin = append(rep.Builtin, w)
		default:
			rep.Missing = append(rep.Missing, w)
		}
	}
	var dep bytes.Buffer
	for _, name := range order {
		rel := filepath.ToSlash(moduleExt.ReplaceAllString(files[name], ".ko"))
		var ds []string
		for _, d := range transitive(name, deps) {
			ds = append(ds, filepath.ToSlash(moduleExt.ReplaceAllString(files[d], ".ko")))
		}
		fmt.Fprintf(&dep, "%s: %s\n", rel, strings.Join(ds, " "))
	}
	modDir := path.Join("lib/modules", k.Release)
	t.File(path.Join(modDir, "modules.dep"), 0o644, dep.Bytes())
	if _, err := os.Stat(filepath.Join(k.ModulesDir, "modules.builtin")); err == nil {
		t.Copy(path.Join(modDir, "modules.builtin"), 0o644, filepath.Join(k.ModulesDir, "modules.builtin"))
	}
	t.File("etc/vmlane/modules", 0o644, []byte(strings.Join(rep.Loaded, "\n")+"\n"))
	return rep, nil
}

// transitive lists the module dependencies of name that are modules,
// deepest last, as modules.dep wants them.
func transitive(name string, deps map[string][]string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(n string)
	walk = func(n string) {
		for _, d := range deps[n] {
			if _, isMod := deps[d]; !isMod || seen[d] {
				continue
			}
			seen[d] = true
			out = append(out, d)
			walk(d)
		}
	}
	walk(name)
	return out
}

func decompressModule(ctx context.Context, src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("module cache: %w", err)
	}
	var argv []string
	switch {
	case strings.HasSuffix(src, ".ko.xz"):
		argv = []string{"xz", "-dc", src}
	case strings.HasSuffix(src, ".ko.zst"):
		argv = []string{"zstd", "-dcq", src}
	case strings.HasSuffix(src, ".ko.gz"):
		argv = []string{"gzip", "-dc", src}
	}
	var data []byte
	var err error
	if argv == nil {
		data, err = os.ReadFile(src)
	} else {
		data, err = exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
	}
	if err != nil {
		return fmt.Errorf("decompress module %s: %w", src, err)
	}
	if err := keepFile(dst, data); err != nil {
		return fmt.Errorf("module cache: %w", err)
	}
	return nil
}

// moduleDepends reads the depends= entry of a module's .modinfo section.
func moduleDepends(ko string) ([]string, error) {
	f, err := elf.Open(ko)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, errors.New("no .modinfo section")
	}
	data, err := s.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return []string{}, nil
			}
			var out []string
			for _, d := range strings.Split(string(v), ",") {
				out = append(out, strings.ReplaceAll(d, "-", "_"))
			}
			return out, nil
		}
	}
	return []string{}, nil
}

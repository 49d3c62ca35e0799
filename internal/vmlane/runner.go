package vmlane

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Columns are the matrix's columns, by the names --kernels takes: this
// machine, the kernels of Specs under the busybox init, and the systemd
// guest (bookworm's kernel and root filesystem, systemd as PID 1).
var Columns = []string{"host", "bookworm", "7x", SystemdColumn}

// Options configure a matrix run.
type Options struct {
	Kernels  []string         // names of Columns
	Cache    string           // downloads, unpacked kernels, builds
	Root     string           // module root
	Binaries []Binary         // the test binaries
	Build    map[string]error // packages whose tests did not build
	Lanes    string           // static lanes CLI for `lanes doctor`, or ""
	Mirrors  Mirrors
	QEMU     QEMU
	Modules  []string
	Tools    []string
	Busybox  string
	TestArgs []string
	Console  io.Writer // the guest console as it arrives, or nil
	// Resolved holds kernels already resolved and unpacked, by name;
	// the others are resolved with Resolve.
	Resolved map[string]*Kernel
	Logf     func(format string, args ...any)

	Parallel int      // VMs booted at once (each takes one host core)
	HostDirs []string // host directories the tests read, copied to the same path
	// ConsoleDir keeps each kernel's last console as console-<kernel>.log;
	// "" keeps none.
	ConsoleDir string

	work string // this run's own directory under Cache
}

// KernelRun is the outcome of the tests on one kernel.
type KernelRun struct {
	Kernel   string // a column: "host", "bookworm", "7x", "systemd"
	Release  string
	Source   string // the Debian suite and version (and systemd's, in the systemd column), or "this machine"
	Packages []PackageResult
	Checks   map[string]SkipCheck // by "package TestName", for skips
	Doctor   []string
	DoctorRC int
	Mechs    []Mechanism // from `lanes doctor --json`
	Info     map[string]string
	Modules  ModuleReport
	Timings  []Timing
	Facts    Facts
	Failures []string // why this kernel's run failed; empty when it passed
}

// Timing is one measured step.
type Timing struct {
	Step    string
	Seconds float64
}

func (r *KernelRun) timed(step string, start time.Time) {
	r.Timings = append(r.Timings, Timing{step, time.Since(start).Seconds()})
}

// Run runs the binaries on every kernel in turn (one VM at a time: the
// machine is shared) and checks the results.
func Run(ctx context.Context, o Options) []*KernelRun {
	var runs []*KernelRun
	// Each run has its own work directory: several runs (a developer's,
	// a go test of this package) may share the cache at once.
	if err := os.MkdirAll(filepath.Join(o.Cache, "work"), 0o755); err != nil {
		return []*KernelRun{{Kernel: "all", Failures: []string{fmt.Sprintf("cache: %v", err)}}}
	}
	work, err := os.MkdirTemp(filepath.Join(o.Cache, "work"), "run-")
	if err != nil {
		return []*KernelRun{{Kernel: "all", Failures: []string{fmt.Sprintf("cache: %v", err)}}}
	}
	defer os.RemoveAll(work)
	o.work = work
	runs = make([]*KernelRun, len(o.Kernels))
	one := func(i int) {
		name, start := o.Kernels[i], time.Now()
		var r *KernelRun
		switch name {
		case "host":
			r = runHost(ctx, o)
		case SystemdColumn:
			r = runSystemd(ctx, o)
		default:
			r = runVM(ctx, o, name)
		}
		r.timed("total", start)
		evaluate(r, o.Build)
		o.Logf("%s: %s in %.1fs: %s", name, r.Release, time.Since(start).Seconds(), r.Summary())
		runs[i] = r
	}
	// The host's tests run alone (their timing assertions need a quiet
	// machine); then up to Parallel VMs at once, each on one host thread.
	var vms []int
	for i, name := range o.Kernels {
		if name == "host" {
			one(i)
		} else {
			vms = append(vms, i)
		}
	}
	sem := make(chan struct{}, max(o.Parallel, 1))
	var wg sync.WaitGroup
	for _, i := range vms {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			one(i)
		}()
	}
	wg.Wait()
	return runs
}

func runVM(ctx context.Context, o Options, name string) *KernelRun {
	r := &KernelRun{Kernel: name, DoctorRC: -1}
	spec, ok := Specs[name]
	if !ok {
		r.Failures = append(r.Failures, fmt.Sprintf("unknown kernel %q (known: %s)", name, strings.Join(Columns, ", ")))
		return r
	}
	unlock, err := lockCache(o.Cache)
	if err != nil {
		r.Failures = append(r.Failures, err.Error())
		return r
	}
	k, vmlinux, err := prepareKernel(ctx, o, r, spec)
	if err != nil {
		unlock()
		r.Failures = append(r.Failures, err.Error())
		return r
	}
	t := time.Now()
	initrd := filepath.Join(o.work, "initramfs-"+name+".cpio")
	g := Guest{Busybox: o.Busybox, Tools: o.Tools, Binaries: o.Binaries, Lanes: o.Lanes, Modules: o.Modules, TestArgs: o.TestArgs, HostDirs: o.HostDirs}
	rep, size, err := BuildInitramfs(ctx, g, k, filepath.Join(o.Cache, "modules"), initrd)
	unlock()
	r.Modules = rep
	r.timed("initramfs", t)
	if err != nil {
		r.Failures = append(r.Failures, err.Error())
		return r
	}
	q := o.QEMU
	// The initramfs sits in memory twice while it is unpacked, and the
	// rootfs it fills (tmpfs) takes at most half the memory: 384 MB over
	// twice its size left a 340 MB initramfs's last files unwritten
	// ("Initramfs unpacking failed: write error": no ip, no tc) once
	// procwatch's tests joined. Untouched guest memory costs the host
	// nothing.
	if need := 768 + int(2*size>>20); need > q.MemMB {
		q.MemMB = min(need, 4096)
	}
	bootAndParse(ctx, o, r, q, k, vmlinux, initrd, size)
	return r
}

// prepareKernel resolves the kernel of spec (unless o.Resolved has it),
// reads its config into r and extracts its vmlinux for PVH boot. The
// caller holds the cache lock.
func prepareKernel(ctx context.Context, o Options, r *KernelRun, spec KernelSpec) (*Kernel, string, error) {
	t := time.Now()
	k, ok := o.Resolved[spec.Name]
	if !ok {
		var err error
		k, err = Resolve(ctx, spec, o.Mirrors, o.Cache, o.Logf)
		r.timed("resolve+download+unpack", t)
		if err != nil {
			return nil, "", err
		}
	}
	r.Release, r.Source = k.Release, k.Suite+" "+k.Version
	if k.ConfigPath != "" {
		if cfg, err := ReadConfigFile(k.ConfigPath); err == nil {
			r.Facts.Config = cfg
		} else {
			o.Logf("%s: %v", r.Kernel, err)
		}
	}
	vmlinux := filepath.Join(filepath.Dir(k.Root), "vmlinux")
	if _, err := os.Stat(vmlinux); err != nil {
		t = time.Now()
		if err := ExtractVmlinux(ctx, k.Vmlinuz, vmlinux); err != nil {
			return nil, "", err
		}
		r.timed("extract vmlinux", t)
	}
	return k, vmlinux, nil
}

// bootAndParse boots vmlinux with initrd, keeps the console, and fills r
// from what the guest printed: the test binaries' results, lanes doctor,
// the guest's facts, and the failures of the run itself.
func bootAndParse(ctx context.Context, o Options, r *KernelRun, q QEMU, k *Kernel, vmlinux, initrd string, size int64) Console {
	name := r.Kernel
	o.Logf("%s: booting %s (initramfs %.1f MB, %d MB RAM, %d vCPU, TCG, timeout %s)", name, k.Release, float64(size)/1e6, q.MemMB, q.CPUs, q.Timeout)
	t := time.Now()
	out, bootErr := q.Boot(ctx, vmlinux, initrd, o.Console)
	r.timed("qemu", t)
	if o.ConsoleDir != "" {
		if err := keepFile(filepath.Join(o.ConsoleDir, "console-"+name+".log"), []byte(out)); err != nil {
			o.Logf("%s: keep console log: %v", name, err)
		}
	}
	c := ParseConsole(out)
	r.Packages, r.Doctor, r.DoctorRC, r.Info = c.Packages, c.Doctor, c.DoctorRC, c.Info
	var err error
	if r.Mechs, err = ParseDoctorJSON(c.DoctorJSON); err != nil {
		o.Logf("%s: %v", name, err)
	}
	if ctl, ok := c.Info["controllers"]; ok {
		r.Facts.Controllers = strings.Fields(ctl)
	}
	if bootErr != nil {
		r.Failures = append(r.Failures, bootErr.Error()+"; console: "+lastLines(strings.Join(c.Lines, "\n"), 15))
	} else if c.ResultRC < 0 {
		r.Failures = append(r.Failures, "guest printed no result line (panic or bad init); console: "+lastLines(strings.Join(c.Lines, "\n"), 15))
	}
	if c.ResultRC > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("guest exit status %d", c.ResultRC))
	}
	for _, m := range strings.Fields(c.Info["modprobe-failed"]) {
		r.Failures = append(r.Failures, "modprobe "+m+" failed in the guest")
	}
	if len(c.Packages) < len(o.Binaries) && bootErr == nil {
		r.Failures = append(r.Failures, fmt.Sprintf("only %d of %d test binaries reported", len(c.Packages), len(o.Binaries)))
	}
	return c
}

// runHost runs the same binaries on this machine's kernel, each from its
// package directory, as `go test` would.
func runHost(ctx context.Context, o Options) *KernelRun {
	r := &KernelRun{Kernel: "host", Source: "this machine", DoctorRC: -1, Info: map[string]string{}}
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	r.Release = strings.TrimSpace(string(rel))
	r.Facts = HostFacts(r.Release)
	if r.Facts.Config == nil {
		o.Logf("host: no /proc/config.gz or /boot/config-%s: missing-feature skips cannot be checked", r.Release)
	}
	if runtime.GOOS != "linux" {
		r.Failures = append(r.Failures, "the host lane runs on Linux only")
		return r
	}
	for _, b := range o.Binaries {
		t := time.Now()
		ctx, cancel := context.WithTimeout(ctx, o.QEMU.Timeout)
		cmd := exec.CommandContext(ctx, b.Path, append([]string{"-test.v"}, o.TestArgs...)...)
		cmd.Dir = b.Dir
		cmd.Env = append(os.Environ(), "LANES_EMULATED=")
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		cancel()
		rc := 0
		if err != nil {
			rc = -1
			if ee, ok := err.(*exec.ExitError); ok {
				rc = ee.ExitCode()
			}
		}
		if o.Console != nil {
			fmt.Fprintf(o.Console, "VMLANE-BEGIN %s\n%sVMLANE-END %s rc=%d\n", b.Package, out, b.Package, rc)
		}
		r.Packages = append(r.Packages, ParseGoTest(b.Package, splitLines(string(out)), rc))
		r.timed(b.Package, t)
	}
	if o.Lanes != "" {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		out, err := exec.CommandContext(ctx, o.Lanes, "doctor").CombinedOutput()
		cancel()
		r.Doctor, r.DoctorRC = splitLines(string(out)), 0
		if ee, ok := err.(*exec.ExitError); ok {
			r.DoctorRC = ee.ExitCode()
		}
		jctx, jcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		js, _ := exec.CommandContext(jctx, o.Lanes, "doctor", "--json").Output()
		jcancel()
		if r.Mechs, err = ParseDoctorJSON(string(js)); err != nil {
			o.Logf("host: %v", err)
		}
	}
	return r
}

func splitLines(s string) []string {
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}

// HostFacts reads this machine's kernel config (/proc/config.gz, else
// /boot/config-<release>) and the controllers of its cgroup v2 mount.
func HostFacts(release string) Facts {
	var f Facts
	for _, p := range []string{"/proc/config.gz", "/boot/config-" + release} {
		if cfg, err := ReadConfigFile(p); err == nil {
			f.Config = cfg
			break
		}
	}
	mounts, err := os.Open("/proc/self/mounts")
	if err != nil {
		return f
	}
	defer mounts.Close()
	sc := bufio.NewScanner(mounts)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 2 && fields[2] == "cgroup2" {
			data, err := os.ReadFile(filepath.Join(fields[1], "cgroup.controllers"))
			if err == nil {
				f.Controllers = strings.Fields(string(data))
				break
			}
		}
	}
	return f
}

// evaluate checks a kernel's results: failed binaries and tests, skips
// that contradict the kernel's config, packages that did not build.
func evaluate(r *KernelRun, build map[string]error) {
	r.Checks = map[string]SkipCheck{}
	for pkg, err := range build {
		r.Failures = append(r.Failures, fmt.Sprintf("%s: tests did not build: %v", pkg, err))
	}
	for _, p := range r.Packages {
		if p.ExitCode != 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%s: test binary exit status %d", p.Package, p.ExitCode))
		}
		for _, t := range p.Tests {
			key := p.Package + " " + t.Name
			switch t.Outcome {
			case Fail:
				r.Failures = append(r.Failures, fmt.Sprintf("%s: FAIL: %s", key, t.Reason))
			case Skip:
				c := CheckSkip(t.Reason, r.Facts)
				r.Checks[key] = c
				if c.Verdict == Contradicted {
					r.Failures = append(r.Failures, fmt.Sprintf("%s: skipped for missing %q but %s", key, c.Feature, c.Detail))
				}
			}
		}
	}
}

// Counts returns the number of passed, skipped and failed tests.
func (r *KernelRun) Counts() (pass, skip, fail int) {
	for _, p := range r.Packages {
		for _, t := range p.Tests {
			switch t.Outcome {
			case Pass:
				pass++
			case Skip:
				skip++
			case Fail:
				fail++
			}
		}
	}
	return
}

// Summary is a one-line result.
func (r *KernelRun) Summary() string {
	p, s, f := r.Counts()
	verdict := "PASS"
	if len(r.Failures) > 0 {
		verdict = fmt.Sprintf("FAIL (%d problems)", len(r.Failures))
	}
	return fmt.Sprintf("%s: %d passed, %d skipped, %d failed in %d packages", verdict, p, s, f, len(r.Packages))
}

// keepFile replaces path atomically, so that concurrent runs never leave
// a mix of two transcripts.
func keepFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/internal/vmlane"
)

// Main is the lanes-vmlane command: it parses args, runs the matrix and
// returns the exit status (0 when every kernel passed).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lanes-vmlane", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kernels := fs.String("kernels", "host,bookworm,7x", "kernels to test: host (this machine), bookworm (Debian 6.1), 7x (trixie-backports or sid), "+
		vmlane.SystemdColumn+" (bookworm's kernel booting systemd as PID 1 from a debootstrapped bookworm root filesystem, with the lanes .deb; runs only tests matching -test.run="+vmlane.SystemdDefaultRun+" unless --run is given)")
	cache := fs.String("cache", "/var/cache/lanes-vmlane", "cache for kernel packages, unpacked kernels and builds")
	timeout := fs.Duration("timeout", 600*time.Second, "limit for each kernel's test run (QEMU is killed after it)")
	pkgs := fs.String("pkgs", "./...", "comma-separated package patterns")
	all := fs.Bool("all", false, "run every package with tests, not only those whose tests use internal/testutil")
	install := fs.Bool("install", false, "apt-get install what the lane needs ("+strings.Join(vmlane.InstallPackages, " ")+") first")
	report := fs.String("report", "", "write the matrix as Markdown to this file")
	console := fs.Bool("console", false, "echo each guest's console to stderr as it runs")
	run := fs.String("run", "", "only tests matching this regexp (-test.run); without it the "+vmlane.SystemdColumn+" column runs only tests matching "+vmlane.SystemdDefaultRun)
	mem := fs.Int("mem", 1024, "guest memory in MB (raised when the initramfs is large; the "+vmlane.SystemdColumn+" guest gets 1.5 GB plus twice its initramfs, at most 4 GB)")
	hostDirs := fs.String("host-dirs", "", "comma-separated host directories the tests read by absolute path, copied into each guest at the same path")
	parallel := fs.Int("parallel", 1, "VMs to boot at once (each uses one host core; the host lane always runs alone)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, "vmlane %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	if *install {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "--no-install-recommends"}, vmlane.InstallPackages...)...)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if err := cmd.Run(); err != nil {
			logf("install: %v", err)
			return 1
		}
	}
	if *kernels == "" {
		return 0 // --install --kernels= only installs
	}
	root, err := vmlane.ModuleRoot(ctx)
	if err != nil {
		logf("%v", err)
		return 1
	}
	cacheDir, err := filepath.Abs(*cache)
	if err != nil {
		logf("cache: %v", err)
		return 1
	}
	t := time.Now()
	listed, err := vmlane.ListPackages(ctx, root, strings.Split(*pkgs, ","))
	if err != nil {
		logf("%v", err)
		return 1
	}
	var chosen []vmlane.Package
	for _, p := range listed {
		if p.Rel != vmlane.SelfRel && (*all || p.Privileged) {
			chosen = append(chosen, p)
		}
	}
	if err := os.MkdirAll(filepath.Join(cacheDir, "work"), 0o755); err != nil {
		logf("cache: %v", err)
		return 1
	}
	binDir, err := os.MkdirTemp(filepath.Join(cacheDir, "work"), "bin-")
	if err != nil {
		logf("cache: %v", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	bins, failed, err := vmlane.BuildTests(ctx, root, chosen, binDir)
	if err != nil {
		logf("%v", err)
		return 1
	}
	lanes, err := vmlane.BuildLanes(ctx, root, binDir)
	if err != nil {
		logf("lanes doctor skipped: %v", err)
	}
	logf("built %d test binaries (%d did not build) in %.1fs", len(bins), len(failed), time.Since(t).Seconds())
	for _, b := range bins {
		logf("  %s", b.Package)
	}
	tools := append([]string{}, vmlane.DefaultTools...)
	for _, tool := range vmlane.OptionalTools {
		if _, err := exec.LookPath(tool); err == nil {
			tools = append(tools, tool)
		}
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		busybox = "/bin/busybox"
	}
	testArgs := []string{fmt.Sprintf("-test.timeout=%s", *timeout*8/10)}
	if *run != "" {
		testArgs = append(testArgs, "-test.run="+*run)
	}
	o := vmlane.Options{
		Kernels: strings.Split(*kernels, ","), Cache: cacheDir, Root: root,
		Binaries: bins, Build: failed, Lanes: lanes, Mirrors: vmlane.SystemMirrors("/etc/apt"),
		QEMU:     vmlane.QEMU{Binary: "qemu-system-x86_64", MemMB: *mem, CPUs: 2, Timeout: *timeout},
		Parallel: *parallel, ConsoleDir: filepath.Join(cacheDir, "work"),
		Modules: vmlane.DefaultModules, Tools: tools, Busybox: busybox, TestArgs: testArgs, Logf: logf,
	}
	if *console {
		o.Console = stderr
	}
	for _, d := range strings.Split(*hostDirs, ",") {
		if _, err := os.Stat(d); d != "" && err != nil {
			logf("host dir %s not copied into the guests: %v", d, err)
		} else if d != "" {
			o.HostDirs = append(o.HostDirs, d)
		}
	}
	runs := vmlane.Run(ctx, o)
	vmlane.WriteText(stdout, runs)
	if *report != "" {
		var b strings.Builder
		vmlane.WriteMarkdown(&b, runs)
		if err := os.WriteFile(*report, []byte(b.String()), 0o644); err != nil {
			logf("report: %v", err)
			return 1
		}
	}
	for _, r := range runs {
		if len(r.Failures) > 0 {
			return 1
		}
	}
	return 0
}

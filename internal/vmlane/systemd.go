package vmlane

import (
	"context"
	_ "embed"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// SystemdColumn is the matrix column that boots systemd as PID 1 from a
// Debian bookworm root filesystem on bookworm's kernel: cgroup v2 set up
// by systemd, as most users run lanes.
const SystemdColumn = "systemd"

// SystemdDefaultRun is the -test.run the systemd column gives the test
// binaries unless the run names its own: the tests written for it have
// "Systemd" in their names; the others already run on the bookworm and
// 7x columns, and booting a whole system under TCG is slow enough.
const SystemdDefaultRun = "Systemd"

// SystemdKernel is the kernel spec the systemd column boots.
const SystemdKernel = "bookworm"

// The systemd guest's test runner and its unit.
var (
	//go:embed systemd_guest.sh
	systemdGuestScript []byte
	//go:embed vmlane-tests.service
	systemdGuestUnit []byte
)

// Where the systemd guest finds what the host puts in.
const (
	guestDeb    = "/root/lanes.deb"
	guestRunner = "/usr/local/sbin/vmlane-tests"
	guestUnit   = "/etc/systemd/system/vmlane-tests.service"
)

// SystemdTestArgs returns the test binaries' arguments for the systemd
// column: args with -test.run=SystemdDefaultRun added unless args
// already choose tests with -test.run.
func SystemdTestArgs(args []string) []string {
	for _, a := range args {
		if a == "-test.run" || strings.HasPrefix(a, "-test.run=") {
			return args
		}
	}
	return append(append([]string{}, args...), "-test.run="+SystemdDefaultRun)
}

// systemdAppend is the kernel command line of the systemd guest: systemd
// from the initramfs as the real init (there is no /etc/initrd-release,
// so it does not act as an initrd), without status lines or gettys on
// the console, rebooting (which QEMU turns into an exit) should it crash.
const systemdAppend = "rdinit=/lib/systemd/systemd systemd.show_status=0 systemd.getty_auto=0 systemd.crash_reboot=1"

// runSystemd runs the systemd column: it builds (or reuses) the root
// filesystem and the kernel's module tree, the lanes .deb, packs them
// with the tests into an initramfs, boots it and parses the console.
func runSystemd(ctx context.Context, o Options) *KernelRun {
	r := &KernelRun{Kernel: SystemdColumn, DoctorRC: -1}
	// The .deb first, outside the cache lock: it is a go build.
	t := time.Now()
	deb, err := BuildDeb(ctx, o.Root, filepath.Join(o.work, "deb"))
	r.timed("lanes .deb", t)
	if err != nil {
		r.Failures = append(r.Failures, err.Error())
		return r
	}
	unlock, err := lockCache(o.Cache)
	if err != nil {
		r.Failures = append(r.Failures, err.Error())
		return r
	}
	k, vmlinux, err := prepareKernel(ctx, o, r, Specs[SystemdKernel])
	if err != nil {
		unlock()
		r.Failures = append(r.Failures, err.Error())
		return r
	}
	t = time.Now()
	rootfs, err := BuildRootfs(ctx, o.Mirrors.Debian, o.Cache, o.Logf)
	r.timed("rootfs", t)
	if err != nil {
		unlock()
		r.Failures = append(r.Failures, err.Error())
		return r
	}
	t = time.Now()
	mods, rep, err := BuildModuleTree(ctx, k, o.Modules, o.Logf)
	r.Modules = rep
	r.timed("module tree", t)
	if err != nil {
		unlock()
		r.Failures = append(r.Failures, err.Error())
		return r
	}
	t = time.Now()
	initrd := filepath.Join(o.work, "initramfs-"+SystemdColumn+".cpio")
	g := Guest{Binaries: o.Binaries, Lanes: o.Lanes, TestArgs: SystemdTestArgs(o.TestArgs), HostDirs: o.HostDirs}
	size, err := BuildSystemdInitramfs(g, rootfs, mods, k.Release, rep.Loaded, deb, initrd)
	unlock()
	r.timed("initramfs", t)
	if err != nil {
		r.Failures = append(r.Failures, err.Error())
		return r
	}
	q := o.QEMU
	q.Append = strings.TrimSpace(systemdAppend + " " + q.Append)
	// The archive and the tmpfs unpacked from it are both in memory
	// until the kernel frees the archive; systemd and the tests want
	// room besides. Untouched guest memory costs the host nothing.
	q.MemMB = max(q.MemMB, min(1536+int(2*size>>20), 4096))
	c := bootAndParse(ctx, o, r, q, k, vmlinux, initrd, size)
	if v := c.Info["systemd"]; v != "" {
		r.Source += ", " + v
	}
	if pid1 := c.Info["pid1"]; pid1 != "" && pid1 != "systemd" {
		r.Failures = append(r.Failures, fmt.Sprintf("PID 1 in the guest is %q, not systemd", pid1))
	}
	return r
}

// BuildSystemdInitramfs writes the systemd guest's initramfs to out: the
// root filesystem, the module tree (built by BuildModuleTree) at
// /lib/modules/<release>, the tests as BuildInitramfs places them, the
// lanes .deb as /root/lanes.deb, and vmlane-tests.service enabled.
// modules are those the runner loads before the tests.
func BuildSystemdInitramfs(g Guest, rootfs, moduleTree, release string, modules []string, deb, out string) (int64, error) {
	t := Tree{}
	err := t.CopyTree("", rootfs, func(rel string) bool {
		// Mount points systemd mounts over, and the device nodes
		// debootstrap made (devtmpfs has them).
		dir, _, _ := strings.Cut(rel, "/")
		switch dir {
		case "dev", "proc", "sys", "run", "tmp":
			return rel != dir
		}
		return false
	})
	if err != nil {
		return 0, fmt.Errorf("initramfs: %w", err)
	}
	// The kernel opens the console for PID 1 before devtmpfs is mounted.
	t.CharDev("dev/console", 5, 1)
	t.CharDev("dev/null", 1, 3)
	// /lib is a symlink to usr/lib in bookworm's merged /usr.
	if err := t.CopyTree("usr/lib/modules/"+release, filepath.Join(moduleTree, "lib/modules", release), nil); err != nil {
		return 0, fmt.Errorf("initramfs: %w", err)
	}
	t.File("etc/vmlane/modules", 0o644, []byte(strings.Join(modules, "\n")+"\n"))
	if err := addTests(t, g); err != nil {
		return 0, err
	}
	t.Copy(guestDeb, 0o644, deb)
	t.File(guestRunner, 0o755, systemdGuestScript)
	t.File(guestUnit, 0o644, systemdGuestUnit)
	t.Symlink(path.Join("etc/systemd/system/multi-user.target.wants", path.Base(guestUnit)), guestUnit)
	return writeCpioFile(t, out)
}

package vmlane

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// The systemd guest's root filesystem: Debian bookworm as debootstrap
// installs it, with these packages on top of minbase.
const (
	RootfsSuite   = "bookworm"
	RootfsVariant = "minbase"
	// rootfsFormat is bumped whenever customiseRootfs changes what it
	// does, so that cached root filesystems built the old way are not
	// reused.
	rootfsFormat = 1
)

// RootfsPackages are debootstrap's --include for the systemd guest.
var RootfsPackages = []string{"systemd", "systemd-sysv", "dbus", "iproute2", "kmod", "procps", "curl", "udev"}

// rootfsMasked are units masked in the systemd guest: useless or slow
// under TCG, or they would take the serial console.
var rootfsMasked = []string{
	// No logins: the console belongs to the test output.
	"getty@tty1.service", "serial-getty@ttyS0.service", "console-getty.service", "getty-static.service",
	// No network, no clock to sync, no package maintenance.
	"systemd-timesyncd.service",
	"apt-daily.timer", "apt-daily.service", "apt-daily-upgrade.timer", "apt-daily-upgrade.service",
	"dpkg-db-backup.timer", "dpkg-db-backup.service",
	"e2scrub_all.timer", "e2scrub_all.service", "e2scrub_reap.service", "fstrim.timer", "fstrim.service",
	// ConditionNeedsUpdate=/etc units: the initramfs's timestamps say
	// nothing about updates, and rebuilding the hwdb takes a minute under
	// TCG; debootstrap already built the caches.
	"systemd-hwdb-update.service", "ldconfig.service",
	"systemd-journal-catalog-update.service", "systemd-update-done.service",
}

// RootfsHostname is the systemd guest's hostname.
const RootfsHostname = "vmlane-systemd"

// rootfsKey names a cached root filesystem: the suite and a short hash of
// what went into it (variant, packages, format version).
func rootfsKey(suite, variant string, packages []string, format int) string {
	pkgs := append([]string{}, packages...)
	sort.Strings(pkgs)
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\n%s\n%s\nformat %d\n", suite, variant, strings.Join(pkgs, ","), format)))
	return suite + "-" + hex.EncodeToString(h[:])[:12]
}

// BuildRootfs returns the directory of the systemd guest's root
// filesystem under cache/rootfs, building it with debootstrap from the
// mirror the first time: into a temporary directory, renamed into place
// when complete. The caller holds the cache lock.
func BuildRootfs(ctx context.Context, mirror, cache string, logf func(string, ...any)) (string, error) {
	base := filepath.Join(cache, "rootfs")
	dir := filepath.Join(base, rootfsKey(RootfsSuite, RootfsVariant, RootfsPackages, rootfsFormat))
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", errors.New("debootstrap not found: run `lanes-vmlane --install` (apt-get install debootstrap)")
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("rootfs cache: %w", err)
	}
	// Builds that died (killed, machine rebooted) leave .build-* behind;
	// the lock says that none is running now.
	stale, _ := filepath.Glob(filepath.Join(base, ".build-*"))
	for _, s := range stale {
		if err := removeBuild(s); err != nil {
			return "", err
		}
	}
	tmp, err := os.MkdirTemp(base, ".build-")
	if err != nil {
		return "", fmt.Errorf("rootfs cache: %w", err)
	}
	defer removeBuild(tmp)
	root := filepath.Join(tmp, "root")
	logf("systemd: building the %s root filesystem with debootstrap (%s, %s) from %s", RootfsSuite, RootfsVariant, strings.Join(RootfsPackages, ","), mirror)
	t := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant="+RootfsVariant, "--include="+strings.Join(RootfsPackages, ","),
		RootfsSuite, root, mirror)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	// debootstrap mounts proc and sys in the target and unmounts them on
	// exit: stop it with SIGTERM so that its trap runs.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.WriteFile(filepath.Join(base, "debootstrap-failed.log"), out, 0o644)
		return "", fmt.Errorf("debootstrap %s: %w: %s (whole log in %s)", RootfsSuite, err, lastLines(string(out), 5), filepath.Join(base, "debootstrap-failed.log"))
	}
	logf("systemd: debootstrap finished in %.1fs", time.Since(t).Seconds())
	if err := customiseRootfs(root); err != nil {
		return "", err
	}
	if err := unmountUnder(root); err != nil {
		return "", err
	}
	if err := os.Rename(root, dir); err != nil {
		return "", fmt.Errorf("rootfs cache: %w", err)
	}
	logf("systemd: root filesystem %s ready in %.1fs", dir, time.Since(t).Seconds())
	return dir, nil
}

// customiseRootfs sets a debootstrapped root up as the test guest: a
// hostname, multi-user.target as the default, the masked units, a
// volatile journal, and the documentation and apt caches removed (they
// only make the initramfs larger).
func customiseRootfs(root string) error {
	write := func(rel, data string) error {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("rootfs: %w", err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return fmt.Errorf("rootfs: %w", err)
		}
		return nil
	}
	link := func(rel, target string) error {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("rootfs: %w", err)
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rootfs: %w", err)
		}
		if err := os.Symlink(target, p); err != nil {
			return fmt.Errorf("rootfs: %w", err)
		}
		return nil
	}
	files := map[string]string{
		"etc/hostname": RootfsHostname + "\n",
		"etc/hosts":    "127.0.0.1 localhost\n127.0.1.1 " + RootfsHostname + "\n::1 localhost ip6-localhost ip6-loopback\n",
		// Status lines would interleave with the tests' output.
		"etc/systemd/system.conf.d/vmlane.conf":   "[Manager]\nShowStatus=no\n",
		"etc/systemd/journald.conf.d/vmlane.conf": "[Journal]\nStorage=volatile\nForwardToConsole=no\n",
	}
	for rel, data := range files {
		if err := write(rel, data); err != nil {
			return err
		}
	}
	if err := link("etc/systemd/system/default.target", "/lib/systemd/system/multi-user.target"); err != nil {
		return err
	}
	for _, u := range rootfsMasked {
		if err := link(filepath.Join("etc/systemd/system", u), "/dev/null"); err != nil {
			return err
		}
		// The enablement links of a masked unit only draw warnings.
		wants, _ := filepath.Glob(filepath.Join(root, "etc/systemd/system/*.wants", u))
		for _, w := range wants {
			if err := os.Remove(w); err != nil {
				return fmt.Errorf("rootfs: %w", err)
			}
		}
	}
	for _, pattern := range []string{
		"usr/share/doc/*", "usr/share/man/*", "usr/share/info/*", "usr/share/locale/*",
		"var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*_*",
	} {
		matches, _ := filepath.Glob(filepath.Join(root, pattern))
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return fmt.Errorf("rootfs: %w", err)
			}
		}
	}
	return nil
}

// removeBuild removes a rootfs build directory after unmounting what a
// killed debootstrap may have left mounted in it (proc, sys).
func removeBuild(dir string) error {
	if err := unmountUnder(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("rootfs cache: %w", err)
	}
	return nil
}

// unmountUnder unmounts every mount point at or below dir, deepest first,
// and fails when one stays: removing a directory with proc or sys
// mounted inside would descend into them.
func unmountUnder(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		p := unescapeMount(fields[1])
		if p == abs || strings.HasPrefix(p, abs+"/") {
			points = append(points, p)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points))) // children sort after parents
	for _, p := range points {
		if err := detachMount(p); err != nil {
			return fmt.Errorf("unmount %s (left by debootstrap): %w", p, err)
		}
	}
	return nil
}

// unescapeMount undoes the octal escapes of /proc/self/mounts (\040 for
// a space and so on).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

package vmlane

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSystemdTestArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"none", nil, []string{"-test.run=Systemd"}},
		{"timeout only", []string{"-test.timeout=8m"}, []string{"-test.timeout=8m", "-test.run=Systemd"}},
		{"--run given", []string{"-test.timeout=8m", "-test.run=TestApply"}, []string{"-test.timeout=8m", "-test.run=TestApply"}},
		{"-test.run as two arguments", []string{"-test.run", "X"}, []string{"-test.run", "X"}},
		{"-test.runx is not -test.run", []string{"-test.runx=1"}, []string{"-test.runx=1", "-test.run=Systemd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SystemdTestArgs(tt.args); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SystemdTestArgs(%q) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
	// The result never shares the caller's backing array.
	args := make([]string, 1, 4)
	args[0] = "-test.v"
	got := SystemdTestArgs(args)
	if got[1] = "changed"; args[:2][1] == "changed" {
		t.Error("SystemdTestArgs appended into the caller's slice")
	}
}

func TestInGuestModuleDirs(t *testing.T) {
	tests := []struct {
		rel  string
		want bool
	}{
		{"kernel/net/sched/sch_hfsc.ko", true},
		{"kernel/net/sched/sch_cake.ko.xz", true},
		{"kernel/drivers/net/veth.ko", true},
		{"kernel/drivers/net/ifb.ko", true},
		{"kernel/drivers/block/null_blk/null_blk.ko", true},
		{"kernel/block/bfq.ko", true},
		{"kernel/fs/overlayfs/overlay.ko", true},
		{"kernel/drivers/net/wireless/intel/iwlwifi/iwlwifi.ko", false},
		{"kernel/drivers/net/ethernet/intel/e1000e/e1000e.ko", false},
		{"kernel/net/mac80211/mac80211.ko", false},
		{"kernel/drivers/gpu/drm/i915/i915.ko", false},
		{"kernel/sound/core/snd.ko", false},
		{"kernel/network.ko", false}, // a prefix of kernel/net is not under it
	}
	for _, tt := range tests {
		if got := inGuestModuleDirs(tt.rel); got != tt.want {
			t.Errorf("inGuestModuleDirs(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
}

// TestBuildSystemdInitramfs packs a stand-in root filesystem and module
// tree and checks where everything lands, what is left out, and that the
// runner's unit is enabled.
func TestBuildSystemdInitramfs(t *testing.T) {
	dir := t.TempDir()
	write := func(p, data string, perm os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
	}
	rootfs := filepath.Join(dir, "rootfs")
	write(filepath.Join(rootfs, "usr/lib/systemd/systemd"), "systemd", 0o755)
	write(filepath.Join(rootfs, "usr/bin/passwd"), "setuid", 0o755|os.ModeSetuid)
	write(filepath.Join(rootfs, "dev/null"), "not a device", 0o644)
	write(filepath.Join(rootfs, "run/systemd/stale"), "x", 0o644)
	write(filepath.Join(rootfs, "etc/hostname"), RootfsHostname+"\n", 0o644)
	for _, d := range []string{"proc", "sys", "tmp", "root"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(rootfs, "tmp"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(rootfs, "root"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/lib", filepath.Join(rootfs, "lib")); err != nil {
		t.Fatal(err)
	}
	mods := filepath.Join(dir, "mods")
	write(filepath.Join(mods, "lib/modules/6.1.0-1-amd64/kernel/net/sched/sch_htb.ko"), "htb", 0o644)
	write(filepath.Join(mods, "lib/modules/6.1.0-1-amd64/modules.dep"), "kernel/net/sched/sch_htb.ko:\n", 0o644)
	pkgDir := filepath.Join(dir, "src/netsched")
	write(filepath.Join(pkgDir, "testdata/x.txt"), "data", 0o644)
	write(filepath.Join(pkgDir, "netsched.go"), "package netsched", 0o644)
	bin := filepath.Join(dir, "netsched.test")
	write(bin, "test binary", 0o755)
	deb := filepath.Join(dir, "lanes_1_amd64.deb")
	write(deb, "deb", 0o644)
	lanes := filepath.Join(dir, "lanes")
	write(lanes, "lanes", 0o755)

	out := filepath.Join(dir, "initramfs.cpio")
	g := Guest{Binaries: []Binary{{Package: "netsched", Path: bin, Dir: pkgDir}}, Lanes: lanes, TestArgs: SystemdTestArgs([]string{"-test.timeout=1m"})}
	n, err := BuildSystemdInitramfs(g, rootfs, mods, "6.1.0-1-amd64", []string{"sch_htb"}, deb, out)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil || int64(len(data)) != n {
		t.Fatalf("archive %d bytes, reported %d: %v", len(data), n, err)
	}
	files, _ := readCpio(t, data)
	want := map[string]cpioFile{
		"usr/lib/systemd/systemd": {modeFile | 0o755, "systemd", 0, 0},
		"usr/bin/passwd":          {modeFile | 0o4755, "setuid", 0, 0},
		"lib":                     {modeLink | 0o777, "usr/lib", 0, 0},
		"tmp":                     {modeDir | 0o1777, "", 0, 0},
		"root":                    {modeDir | 0o700, "", 0, 0},
		"dev/console":             {modeChar | 0o600, "", 5, 1},
		"dev/null":                {modeChar | 0o600, "", 1, 3},
		"usr/lib/modules/6.1.0-1-amd64/kernel/net/sched/sch_htb.ko": {modeFile | 0o644, "htb", 0, 0},
		"usr/lib/modules/6.1.0-1-amd64/modules.dep":                 {modeFile | 0o644, "kernel/net/sched/sch_htb.ko:\n", 0, 0},
		"etc/vmlane/modules":                      {modeFile | 0o644, "sch_htb\n", 0, 0},
		"etc/vmlane/tests":                        {modeFile | 0o644, "netsched\t/t/netsched\tnetsched.test\n", 0, 0},
		"etc/vmlane/testargs":                     {modeFile | 0o644, "-test.timeout=1m\n-test.run=Systemd\n", 0, 0},
		"t/netsched/netsched.test":                {modeFile | 0o755, "test binary", 0, 0},
		"t/netsched/testdata/x.txt":               {modeFile | 0o644, "data", 0, 0},
		"usr/local/bin/lanes":                     {modeFile | 0o755, "lanes", 0, 0},
		"root/lanes.deb":                          {modeFile | 0o644, "deb", 0, 0},
		"usr/local/sbin/vmlane-tests":             {modeFile | 0o755, string(systemdGuestScript), 0, 0},
		"etc/systemd/system/vmlane-tests.service": {modeFile | 0o644, string(systemdGuestUnit), 0, 0},
		"etc/systemd/system/multi-user.target.wants/vmlane-tests.service": {modeLink | 0o777, "/etc/systemd/system/vmlane-tests.service", 0, 0},
	}
	for name, w := range want {
		if got, ok := files[name]; !ok || got != w {
			t.Errorf("%s: %+v (present %v), want %+v", name, got, ok, w)
		}
	}
	for _, gone := range []string{"run/systemd/stale", "run/systemd", "t/netsched/netsched.go", "etc/initrd-release"} {
		if _, ok := files[gone]; ok {
			t.Errorf("%s is in the archive", gone)
		}
	}
	for _, dir := range []string{"proc", "sys", "run"} {
		if f, ok := files[dir]; !ok || f.mode&0o170000 != modeDir {
			t.Errorf("mount point /%s missing: %+v", dir, f)
		}
	}
}

// TestSystemdGuestFiles checks the runner and its unit for what the host
// depends on: the markers the parser reads, the environment the tests
// read, the console as output, and the power-off.
func TestSystemdGuestFiles(t *testing.T) {
	for _, want := range []string{
		"VMLANE-INFO pid1 ", "VMLANE-INFO systemd ", "VMLANE-INFO controllers ", "VMLANE-INFO subtree_control ",
		"VMLANE-BEGIN $pkg", "VMLANE-END $pkg rc=$rc", "VMLANE-DOCTOR-BEGIN", "VMLANE-DOCTOR-END rc=",
		"VMLANE-DOCTORJSON-BEGIN", "VMLANE-DOCTORJSON-END rc=", "VMLANE-RESULT rc=$overall",
		"LANES_EMULATED=1", "LANES_SYSTEMD_GUEST=1", "LANES_DEB=" + guestDeb, "systemctl poweroff --force",
	} {
		if !bytes.Contains(systemdGuestScript, []byte(want)) {
			t.Errorf("systemd_guest.sh lacks %q", want)
		}
	}
	for _, want := range []string{
		"Type=oneshot", "ExecStart=" + guestRunner, "StandardOutput=tty", "StandardError=tty", "TTYPath=/dev/ttyS0",
		"LANES_EMULATED=1", "LANES_SYSTEMD_GUEST=1", "LANES_DEB=" + guestDeb, "WantedBy=multi-user.target", "After=multi-user.target",
	} {
		if !bytes.Contains(systemdGuestUnit, []byte(want)) {
			t.Errorf("vmlane-tests.service lacks %q", want)
		}
	}
	if !strings.Contains(systemdAppend, "rdinit=/lib/systemd/systemd") {
		t.Errorf("kernel command line %q does not start systemd", systemdAppend)
	}
}

// TestParseSystemdConsole parses a console as the systemd guest prints
// it (CRLF from the tty, systemd's terminal reset before the first
// marker, the power-off printk at the end).
func TestParseSystemdConsole(t *testing.T) {
	text := "\x1bc\x1b[?25h\r\n" +
		"VMLANE-INFO kernel 6.1.0-56-amd64\r\n" +
		"VMLANE-INFO pid1 systemd\r\n" +
		"VMLANE-INFO systemd systemd 252 (252.39-1~deb12u2)\r\n" +
		"VMLANE-INFO failed-units \r\n" +
		"VMLANE-INFO controllers cpuset cpu io memory hugetlb pids rdma misc\r\n" +
		"VMLANE-INFO subtree_control memory pids\r\n" +
		"VMLANE-BEGIN enforce\r\n=== RUN   TestSystemdPlacement\r\n--- PASS: TestSystemdPlacement (1.20s)\r\nPASS\r\n\r\n" +
		"VMLANE-END enforce rc=0 start=18.1 end=19.3\r\n" +
		"VMLANE-BEGIN netsched\r\ntesting: warning: no tests to run\r\nPASS\r\n\r\n" +
		"VMLANE-END netsched rc=0 start=19.3 end=19.4\r\n" +
		"VMLANE-DOCTOR-BEGIN\r\nkernel 6.1.0-56-amd64\r\n\r\nVMLANE-DOCTOR-END rc=0\r\n" +
		"VMLANE-RESULT rc=0\r\n" +
		"[   20.225424] reboot: Power down\r\n"
	c := ParseConsole(text)
	if c.Info["pid1"] != "systemd" || c.Info["systemd"] != "systemd 252 (252.39-1~deb12u2)" || c.Info["subtree_control"] != "memory pids" {
		t.Errorf("info %q", c.Info)
	}
	if c.ResultRC != 0 || c.DoctorRC != 0 || len(c.Packages) != 2 {
		t.Fatalf("result %d, doctor %d, %d packages", c.ResultRC, c.DoctorRC, len(c.Packages))
	}
	if p := c.Packages[0]; p.Package != "enforce" || len(p.Tests) != 1 || p.Tests[0].Outcome != Pass {
		t.Errorf("enforce: %+v", p)
	}
	if p := c.Packages[1]; p.Package != "netsched" || len(p.Tests) != 0 || p.ExitCode != 0 {
		t.Errorf("netsched (no test matched): %+v", p)
	}
}

// TestUnknownKernel checks that a column the matrix does not know fails
// with the list of those it knows, the systemd column among them.
func TestUnknownKernel(t *testing.T) {
	runs := Run(context.Background(), Options{Kernels: []string{"sid"}, Cache: t.TempDir(), Logf: t.Logf})
	if len(runs) != 1 || len(runs[0].Failures) != 1 {
		t.Fatalf("runs %+v", runs)
	}
	if f := runs[0].Failures[0]; !strings.Contains(f, `unknown kernel "sid"`) || !strings.Contains(f, "host, bookworm, 7x, systemd") {
		t.Errorf("failure %q", f)
	}
}

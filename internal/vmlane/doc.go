// Package vmlane is lanes' kernel matrix: it runs the project's privileged
// test binaries on this machine's kernel and inside QEMU guests booting
// stock Debian kernels (bookworm 6.1, a 7.x from trixie-backports or sid),
// and reports pass/fail/skip per test per kernel. Only cmd/lanes-vmlane (its
// command line is cmd/lanes-vmlane/cli) and its own tests import it;
// nothing in the daemon or the CLI may.
//
// For each kernel it resolves the package the Debian mirror carries today
// (private apt state, never installed), downloads and unpacks it into a
// cache, extracts the uncompressed vmlinux for PVH boot, builds an
// initramfs (static busybox, the host's ip and tc with their libraries,
// the modules the tests need, the test binaries and their testdata), and
// boots it with software emulation (TCG; never KVM), always under a
// timeout. The guest mounts cgroup v2 with cpu, io, memory and pids
// delegated, bpffs, proc, sys and tmpfs, loads the modules, exports
// LANES_EMULATED=1 and runs each binary with -test.v from its package
// directory; the console output is parsed on the host.
//
// The systemd column (SystemdColumn) boots bookworm's kernel with a real
// Debian bookworm system instead: a root filesystem built once with
// debootstrap (minbase plus systemd, dbus, udev, iproute2, kmod, ...) and
// cached, the kernel's network, block and filesystem modules with depmod's
// indexes, the tests, the lanes CLI and the lanes .deb, all in one
// initramfs that the kernel runs systemd from as PID 1 (rdinit=). systemd
// sets up cgroup v2 as on a user's machine; vmlane-tests.service runs the
// binaries after multi-user.target with LANES_SYSTEMD_GUEST=1 and
// LANES_DEB, prints the same markers on the serial console, and powers
// off. Only tests matching -test.run=Systemd run there unless the run
// names its own.
//
// A test that skips with "missing kernel feature: X" (testutil.RequireFeature)
// is checked against the kernel's config: a skip for a feature the config
// enables is a failure.
package vmlane

// Command lanes-vmlane runs lanes' privileged tests on this machine's
// kernel and on stock Debian kernels booted in QEMU (software emulation),
// one of them also as a whole Debian system with systemd as PID 1 (the
// systemd column), and reports pass/fail/skip per test per kernel. See
// docs/KERNELS.md.
package main

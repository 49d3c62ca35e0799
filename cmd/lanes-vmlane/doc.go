// Command lanes-vmlane runs lanes' privileged tests on this machine's
// kernel and on stock Debian kernels booted in QEMU (software emulation),
// and reports pass/fail/skip per test per kernel. See docs/KERNELS.md.
package main

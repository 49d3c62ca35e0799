// Package cli is the lanes-vmlane command line: it parses the flags, picks
// the packages whose tests the kernel matrix runs, and hands the run to
// package vmlane, which does the work (resolving kernels, building the
// initramfs, booting QEMU, parsing and reporting).
package cli

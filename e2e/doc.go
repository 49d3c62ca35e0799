// Package e2e holds lanes' end-to-end tests: they run the real lanesd and
// lanes (the test binary re-executes itself in either role, so the tests
// also run where no Go toolchain is, such as the kernel-matrix VMs) against
// the real kernel, as root, and check what a user would see. It has no
// non-test code.
package e2e

// Package testutil holds helpers for lanes' tests that touch the real
// kernel: root checks, unique names for kernel objects, and the gates of
// timing assertions (emulation, the host's load and timer lateness). Only
// _test.go files import it.
package testutil

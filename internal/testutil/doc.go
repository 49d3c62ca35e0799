// Package testutil holds helpers for lanes' tests that touch the real
// kernel: root checks and unique names for kernel objects. Only _test.go
// files import it.
package testutil

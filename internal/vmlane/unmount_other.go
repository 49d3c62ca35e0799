//go:build !linux

package vmlane

import "errors"

// detachMount is Linux-only, as is the systemd column's root filesystem.
func detachMount(p string) error { return errors.New("unmount " + p + ": Linux only") }

package vmlane

import "syscall"

// detachMount unmounts the file system at p lazily (MNT_DETACH), so that
// a busy one goes too.
func detachMount(p string) error { return syscall.Unmount(p, syscall.MNT_DETACH) }

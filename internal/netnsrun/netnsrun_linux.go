package netnsrun

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Run runs fn on a thread in the network namespace at path ("":
// the caller's own). Sockets fn creates stay in that namespace.
func Run(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer ns.Close()
	if err := In(ns, fn); err != nil {
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	return nil
}

// In runs fn on a thread in the network namespace ns (a handle that is
// not open: the caller's own).
func In(ns netns.NsHandle, fn func() error) error {
	if !ns.IsOpen() {
		return fn()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return fmt.Errorf("current network namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		return fmt.Errorf("enter: %w", err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// The thread is left in the other namespace: do not give it back
		// to the runtime (it exits with the goroutine when locked).
		runtime.LockOSThread()
		return fmt.Errorf("leave: %w", err)
	}
	return ferr
}

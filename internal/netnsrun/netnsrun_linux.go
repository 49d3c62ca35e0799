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
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	defer orig.Close()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer ns.Close()
	if err := netns.Set(ns); err != nil {
		return fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// The thread is left in the other namespace: do not give it back
		// to the runtime (it exits with the goroutine when locked).
		runtime.LockOSThread()
		return fmt.Errorf("leave network namespace %s: %w", path, err)
	}
	return ferr
}

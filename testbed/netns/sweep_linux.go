package netns

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"syscall"
)

var leftoverRE = regexp.MustCompile(`^lt([0-9]+)_[0-9]+[sdr][0-9]*$`)

// Sweep deletes the namespaces (and the processes in them) left by testbed
// runs whose process no longer exists. Namespaces of live runs are kept.
func Sweep(logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("sweep: list %s: %w", netnsDir, err)
	}
	var errs []error
	for _, e := range ents {
		m := leftoverRE.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		if pid != os.Getpid() && alive(pid) {
			continue
		}
		if pid == os.Getpid() {
			continue
		}
		logf("sweep: removing namespace %s (run %d is gone)", e.Name(), pid)
		if err := removeNS(e.Name(), logf); err != nil {
			if errors.Is(err, syscall.EBUSY) {
				// The namespace was bound before /run/netns itself became
				// a mount point (iproute2 makes it one): its mount is
				// hidden under that one and cannot be reached by path.
				// It holds no process any more; a reboot clears it.
				logf("sweep: %v (hidden under a later mount of %s; left in place)", err, netnsDir)
				continue
			}
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	return nil
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

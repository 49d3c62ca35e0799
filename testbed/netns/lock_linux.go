package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// LockPath is the lock file that serializes testbed users on a host.
const LockPath = "/run/lanes-testbed.lock"

// LockHost waits until no other process uses the testbed on this host
// (benchmark runs and the emulator tests disturb each other's figures on a
// small machine) and returns the function that releases the host. The
// lock is released when the process exits, however it exits.
func LockHost(ctx context.Context, waiting func()) (func(), error) {
	f, err := os.OpenFile(LockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock testbed: %w", err)
	}
	told := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock testbed %s: %w", LockPath, err)
		}
		if !told && waiting != nil {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock testbed: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

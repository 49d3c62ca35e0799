package vmlane

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockCache takes the cache's lock, which serialises resolving,
// downloading and unpacking kernels between concurrent runs.
func lockCache(cache string) (unlock func(), err error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(cache, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cache lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("cache lock: %w", err)
	}
	return func() { f.Close() }, nil
}

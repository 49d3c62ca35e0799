package procwatch

import (
	"sync"
	"time"
)

// ExePathTTL is how long ExePaths keeps a path: a file renamed (or a
// directory above it) is matched under its old path for at most this long.
const ExePathTTL = time.Second

// exePathsMax bounds ExePaths; it is emptied when full.
const exePathsMax = 4096

// ExePaths keeps the executable path read for each ExeID for ExePathTTL,
// so that a storm of processes running the same program costs one
// readlink of /proc/PID/exe a second, not one a process. Safe for
// concurrent use; the zero value is ready.
type ExePaths struct {
	mu sync.Mutex
	m  map[ExeID]exePath
}

type exePath struct {
	path string
	at   time.Time
}

// Path returns the path of id, calling read for it when it is not kept or
// older than ExePathTTL at now.
func (c *ExePaths) Path(id ExeID, now time.Time, read func() (string, error)) (string, error) {
	c.mu.Lock()
	p, ok := c.m[id]
	c.mu.Unlock()
	if ok && now.Sub(p.at) < ExePathTTL && !now.Before(p.at) {
		return p.path, nil
	}
	path, err := read()
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= exePathsMax {
		c.m = map[ExeID]exePath{}
	}
	c.m[id] = exePath{path: path, at: now}
	c.mu.Unlock()
	return path, nil
}

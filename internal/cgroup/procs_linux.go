package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Procs is a group's cgroup.procs files held open, so that moving a
// process costs one write per hierarchy rather than an open, a write and
// a close (a placement storm moves thousands a second). Safe for
// concurrent use, Close included: no write can reach a descriptor
// closed (and perhaps reused for another file) meanwhile.
type Procs struct {
	g   Group
	mu  sync.RWMutex
	fds []int
}

// OpenProcs opens the group's cgroup.procs files. Where joining resets
// CPU affinities (a v2 group with a cpuset) it fails with
// errors.ErrUnsupported: use AddProc, which keeps them.
func (g Group) OpenProcs() (*Procs, error) {
	if g.v2 != "" && g.HasFile(V2, "cpuset.cpus.effective") {
		return nil, fmt.Errorf("group %s: joining resets CPU affinities: %w", g.name, errors.ErrUnsupported)
	}
	p := &Procs{g: g}
	fds := []int{}
	for _, d := range g.procDirs() {
		path := filepath.Join(d, "cgroup.procs")
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			p.fds = fds
			p.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		fds = append(fds, fd)
	}
	p.fds = fds
	if len(p.fds) == 0 {
		return nil, fmt.Errorf("group %s has no hierarchy", g.name)
	}
	return p, nil
}

// Add moves a whole process into the group in every hierarchy, as AddProc
// does. A process that does not exist gives an error wrapping
// *ProcessError; a group removed meanwhile gives ENODEV or ENOENT.
func (p *Procs) Add(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("move process %d to %s: %w", pid, p.g.name, &ProcessError{PID: pid})
	}
	b := []byte(strconv.Itoa(pid))
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.fds == nil {
		return fmt.Errorf("move process %d to %s: %w", pid, p.g.name, unix.EBADF)
	}
	for i, fd := range p.fds {
		_, err := unix.Write(fd, b)
		for err == unix.EINTR {
			_, err = unix.Write(fd, b)
		}
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("move process %d to %s: %w", pid, p.g.procDirs()[i], &ProcessError{PID: pid})
		}
		if err != nil {
			return fmt.Errorf("move process %d to %s: %w", pid, p.g.procDirs()[i], err)
		}
	}
	return nil
}

// Close closes the files.
func (p *Procs) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, fd := range p.fds {
		if err := unix.Close(fd); err != nil {
			errs = append(errs, err)
		}
	}
	p.fds = nil
	return errors.Join(errs...)
}

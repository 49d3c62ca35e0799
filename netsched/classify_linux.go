package netsched

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/procfs"
)

// classOf returns a lane's class id from any applied plan. Class ids do
// not depend on the interface (BuildPlan numbers lanes the same way).
func (e *Enforcer) classOf(laneName string) (uint32, error) {
	for _, st := range e.ifaces {
		if c, ok := st.plan.Class(laneName); ok {
			return c.ClassID, nil
		}
	}
	if e.sock != nil {
		if c, ok := e.sock.Class(laneName); ok {
			return c.ClassID, nil
		}
	}
	return 0, fmt.Errorf("lane %s has no traffic class: no applied plan has it", laneName)
}

// cgroupID returns the id of the cgroup v2 directory dir: its inode number.
func cgroupID(dir string) (uint64, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() {
		return 0, fmt.Errorf("%s is not a cgroup directory", dir)
	}
	return st.Ino, nil
}

// BindLane classifies the sockets of a lane's cgroup (a cgroup v2
// directory, e.g. /sys/fs/cgroup/unified/lanes-background): sockets created
// in it, or in any cgroup below it, get the lane's class as their priority,
// and packets of sockets created there before are classified by the egress
// classifier. Calling it again updates the binding. Before any applied plan
// has the lane, the binding waits: Apply completes it. Where port rules
// classify instead of BPF (see Mechanisms) it does nothing.
func (e *Enforcer) BindLane(laneName, cgroupV2Dir string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.objs == nil {
		// Port rules classify (see Mechanisms): a cgroup has no say.
		e.logf("netsched: lane %s: cgroup %s not bound, packets are classified by port rules (%v)", laneName, cgroupV2Dir, e.clsErr)
		return nil
	}
	id, err := cgroupID(cgroupV2Dir)
	if err != nil {
		return fmt.Errorf("bind lane %s: cgroup %s: %w", laneName, cgroupV2Dir, err)
	}
	if old, ok := e.bound[laneName]; ok && old.dir != cgroupV2Dir {
		if err := e.unbind(laneName); err != nil {
			return fmt.Errorf("bind lane %s: %w", laneName, err)
		}
	}
	cls, clsErr := e.classOf(laneName)
	if clsErr == nil {
		if err := e.objs.LaneOfCgroup.Put(id, cls); err != nil {
			return fmt.Errorf("bind lane %s: map cgroup %d: %w", laneName, id, err)
		}
	}
	if _, ok := e.cgLinks[cgroupV2Dir]; !ok {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: cgroupV2Dir, Attach: ebpf.AttachCGroupInetSockCreate, Program: e.objs.LanesSockCreate})
		if err != nil {
			_ = e.objs.LaneOfCgroup.Delete(id)
			return fmt.Errorf("bind lane %s: attach sock_create to %s: %w", laneName, cgroupV2Dir, err)
		}
		e.cgLinks[cgroupV2Dir] = l
	}
	e.attachSockops(cgroupV2Dir)
	e.attachSockmark(cgroupV2Dir)
	e.bound[laneName] = boundLane{dir: cgroupV2Dir, cgid: id}
	if clsErr != nil {
		e.logf("netsched: lane %s: cgroup %s (id %d) bound, class pending: %v", laneName, cgroupV2Dir, id, clsErr)
		return nil
	}
	e.logf("netsched: lane %s: cgroup %s (id %d) -> class %x:%x", laneName, cgroupV2Dir, id, cls>>16, cls&0xffff)
	return nil
}

// UnbindLane stops classifying a lane's cgroup.
func (e *Enforcer) UnbindLane(laneName string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.unbind(laneName)
}

func (e *Enforcer) unbind(laneName string) error {
	b, ok := e.bound[laneName]
	if !ok {
		return nil
	}
	var errs []error
	if err := e.objs.LaneOfCgroup.Delete(b.cgid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, fmt.Errorf("unmap cgroup %s: %w", b.dir, err))
	}
	if l, ok := e.cgLinks[b.dir]; ok {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("detach sock_create from %s: %w", b.dir, err))
		}
		delete(e.cgLinks, b.dir)
	}
	if err := e.detachSockops(b.dir); err != nil {
		errs = append(errs, err)
	}
	if err := e.detachSockmark(b.dir); err != nil {
		errs = append(errs, err)
	}
	delete(e.bound, laneName)
	return errors.Join(errs...)
}

// refreshBindings rewrites the cgroup map after a plan changed class ids.
func (e *Enforcer) refreshBindings() error {
	if e.objs == nil {
		return nil
	}
	for name, b := range e.bound {
		cls, err := e.classOf(name)
		if err != nil {
			continue // the lane left the plan; its old binding stays until UnbindLane
		}
		if err := e.objs.LaneOfCgroup.Put(b.cgid, cls); err != nil {
			return fmt.Errorf("remap lane %s: %w", name, err)
		}
	}
	return nil
}

// MoveSockets makes the existing sockets of process pid follow it into
// laneName: each of its inet sockets whose priority is unset or is the
// label lanes gave it at creation is relabelled with the lane's class
// (through a duplicate of the socket obtained with pidfd_getfd). A socket
// whose program set its own priority keeps it: explicit labels win. It
// returns after every socket was tried, with the errors joined. Where port
// rules classify instead of BPF it does nothing.
func (e *Enforcer) MoveSockets(pid int, laneName string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.objs == nil {
		return nil // port rules classify: sockets have no lane
	}
	cls, err := e.classOf(laneName)
	if err != nil {
		return fmt.Errorf("move sockets of %d: %w", pid, err)
	}
	// Most processes placed have no socket (a storm of execs): the listing
	// alone says so, without a pidfd.
	fds, err := procfs.SocketFDs(pid)
	if err != nil {
		return fmt.Errorf("move sockets of %d: %w", pid, err)
	}
	if len(fds) == 0 {
		return nil
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("move sockets of %d: pidfd_open: %w", pid, err)
	}
	defer unix.Close(pidfd)
	var errs []error
	moved, kept := 0, 0
	for _, fd := range fds {
		switch ok, err := e.relabel(pidfd, fd, cls); {
		case err != nil:
			errs = append(errs, fmt.Errorf("fd %d: %w", fd, err))
		case ok:
			moved++
		default:
			kept++
		}
	}
	if moved+kept > 0 {
		e.logf("netsched: pid %d -> lane %s: %d sockets relabelled, %d kept their own label", pid, laneName, moved, kept)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("move sockets of %d: %w", pid, err)
	}
	return nil
}

// relabel sets the class of one socket of another process; it says
// whether it did (false: not an inet socket, or explicitly labelled).
func (e *Enforcer) relabel(pidfd, fd int, cls uint32) (bool, error) {
	dup, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		if errors.Is(err, unix.EBADF) {
			return false, nil // closed meanwhile
		}
		return false, fmt.Errorf("pidfd_getfd: %w", err)
	}
	defer unix.Close(dup)
	domain, err := unix.GetsockoptInt(dup, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return false, fmt.Errorf("get SO_DOMAIN: %w", err)
	}
	if domain != unix.AF_INET && domain != unix.AF_INET6 {
		return false, nil
	}
	prio, err := unix.GetsockoptInt(dup, unix.SOL_SOCKET, unix.SO_PRIORITY)
	if err != nil {
		return false, fmt.Errorf("get SO_PRIORITY: %w", err)
	}
	var label uint32
	if err := e.objs.AutoLabel.Lookup(uint32(dup), &label); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return false, fmt.Errorf("read lanes' label: %w", err)
	}
	if prio != 0 && uint32(prio) != label {
		return false, nil
	}
	// The mark first: setting IP_TOS also sets the socket's priority
	// (from the TOS), which the label then overwrites.
	var errs []error
	fromMarked := uint32(prio)>>16 == Major && e.classMarked(uint32(prio))
	if _, err := e.moveMark(dup, cls, fromMarked); err != nil {
		errs = append(errs, fmt.Errorf("marking: %w", err))
	}
	if err := unix.SetsockoptInt(dup, unix.SOL_SOCKET, unix.SO_PRIORITY, int(cls)); err != nil {
		return false, errors.Join(append(errs, fmt.Errorf("set SO_PRIORITY: %w", hint(err)))...)
	}
	if err := e.objs.AutoLabel.Update(uint32(dup), cls, ebpf.UpdateAny); err != nil {
		return false, errors.Join(append(errs, fmt.Errorf("record lanes' label: %w", err))...)
	}
	if _, err := e.moveCC(dup, cls); err != nil {
		errs = append(errs, fmt.Errorf("congestion control: %w", err))
	}
	return true, errors.Join(errs...)
}

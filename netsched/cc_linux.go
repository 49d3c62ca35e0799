package netsched

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/ledbat"
)

// Congestion control per lane (net.cc): lanes_sockops (bpf/lanes.c),
// attached to every bound lane cgroup beside sock_create, gives the new
// TCP connections of a class with laneFlagLedbat the congestion control
// lanes_ledbat (package ledbat), which the Enforcer registers the first
// time a plan asks for it; MoveSockets gives it to a moved process's
// existing connections, and gives the host's default back to those that
// leave such a lane. A program's own choice (a congestion control other
// than the host's default) is left alone on both paths.

const (
	laneFlagLedbat = 8  // LANE_F_LEDBAT
	laneFlagRecv   = 16 // LANE_F_RLEDBAT (rledbat_linux.go)
)

// ledbatUsable registers lanes_ledbat on first use and says whether the
// lanes that ask for it get it. A failure is remembered (and logged once):
// those lanes' sockets keep the host's default.
func (e *Enforcer) ledbatUsable() bool {
	if e.ledbat != nil {
		return true
	}
	if e.ledbatErr != nil || e.objs == nil {
		return false
	}
	r, err := ledbat.Register()
	if err == nil {
		err = e.setCCDefault()
		if err != nil {
			r.Close()
		}
	}
	if err != nil {
		e.ledbatErr = err
		e.logf("netsched: net.cc = %q: %v; those lanes' sockets keep the host's default congestion control", lane.CCLedbat, err)
		return false
	}
	e.ledbat = r
	e.setLedbatTarget()
	how := "registered"
	if r.Shared() {
		how = "registered already (another process's), used as it is"
	}
	e.logf("netsched: congestion control %s %s; host default %s", ledbat.Name, how, e.ccDefault)
	return true
}

// setCCDefault tells lanes_sockops the host's default congestion control,
// so that it replaces only that one.
func (e *Enforcer) setCCDefault() error {
	def, err := ledbat.Default()
	if err != nil {
		return err
	}
	var v lanesbpf.LanesCcName
	if len(def) >= len(v.Name) {
		return fmt.Errorf("default congestion control %q: name too long", def)
	}
	for i := 0; i < len(def); i++ {
		v.Name[i] = int8(def[i])
	}
	if err := e.objs.CcDefault.Put(uint32(0), &v); err != nil {
		return fmt.Errorf("record the default congestion control: %w", err)
	}
	e.ccDefault = def
	return nil
}

// attachSockops attaches lanes_sockops to a lane's cgroup. Without it the
// lane's new connections keep the host's default: logged, not an error.
func (e *Enforcer) attachSockops(dir string) {
	if _, ok := e.opsLinks[dir]; ok {
		return
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: dir, Attach: ebpf.AttachCGroupSockOps, Program: e.objs.LanesSockops})
	if err != nil {
		e.logf("netsched: attach sock_ops to %s: %v (net.cc does not reach its new connections)", dir, err)
		return
	}
	e.opsLinks[dir] = l
}

func (e *Enforcer) detachSockops(dir string) error {
	l, ok := e.opsLinks[dir]
	if !ok {
		return nil
	}
	delete(e.opsLinks, dir)
	if err := l.Close(); err != nil {
		return fmt.Errorf("detach sock_ops from %s: %w", dir, err)
	}
	return nil
}

// classCC returns the congestion control the sockets of class cls get:
// ledbat.Name or "" (the host's default).
func (e *Enforcer) classCC(cls uint32) string {
	if e.ledbat == nil {
		return ""
	}
	var f uint32
	if err := e.objs.LaneFlags.Lookup(cls, &f); err != nil {
		return ""
	}
	if f&laneFlagLedbat != 0 {
		return ledbat.Name
	}
	return ""
}

// moveCC gives the TCP socket fd (another process's, duplicated) the
// congestion control of its new class: lanes_ledbat in a lane with it, the
// host's default back when it leaves one. A socket whose congestion
// control is neither the default nor lanes_ledbat is the program's choice
// and is left alone. It says whether it changed anything.
func (e *Enforcer) moveCC(fd int, cls uint32) (bool, error) {
	if e.ledbat == nil || e.ccDefault == "" {
		return false, nil
	}
	proto, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	if err != nil || proto != unix.IPPROTO_TCP {
		return false, nil
	}
	cur, err := ledbat.SocketCC(fd)
	if err != nil {
		return false, err
	}
	want := e.classCC(cls)
	if want == "" {
		want = e.ccDefault
	}
	if cur == want || (cur != e.ccDefault && cur != ledbat.Name) {
		return false, nil
	}
	if err := ledbat.SetSocket(fd, want); err != nil {
		if errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.EBADF) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// closeLedbat detaches every sock_ops program and unregisters lanes_ledbat
// (sockets using it keep it until they close).
func (e *Enforcer) closeLedbat() []error {
	var errs []error
	for dir := range e.opsLinks {
		if err := e.detachSockops(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if e.ledbat != nil {
		if err := e.ledbat.Close(); err != nil {
			errs = append(errs, fmt.Errorf("unregister %s: %w", ledbat.Name, err))
		}
		e.ledbat = nil
	}
	return errs
}

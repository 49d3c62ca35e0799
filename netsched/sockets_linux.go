package netsched

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/internal/netprobe"
	"github.com/lanes-qos/lanes/lane"
)

// Per-socket enforcement (SocketPlan): what lanes does to a lane's sockets
// themselves, with or without a tree. The class ids label sockets as in
// every Plan (lanes_sock_create, MoveSockets); lane_flags carries each
// class's socket bits (laneFlagLedbat, laneFlagRecv, laneFlagMarkLE) beside the trees'
// (laneFlagIdle, laneFlagQuiet), all written by syncLaneFlags from every
// plan at once. lanes_sockops (lanes.c) gives a marked lane's TCP
// connections DSCP LE as their own IP_TOS/IPV6_TCLASS, and the sockmark
// programs (bpf/sockmark.c, cgroup connect4/6 and sendmsg4/6) its UDP
// sockets; MoveSockets does the same for a moved process's sockets.

// ApplySockets makes sp the socket plan: lane flags are rewritten, lanes'
// cgroups (BindLane) are mapped to sp's class ids when no tree has them,
// and, when sp marks a lane, the UDP marking programs are loaded and
// attached to every bound cgroup. Where port rules classify (no BPF) it
// does nothing: sockets have no lane.
func (e *Enforcer) ApplySockets(sp SocketPlan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("apply sockets: enforcer closed")
	}
	if e.objs == nil {
		if sp.Acts() {
			e.logf("netsched: per-socket congestion control and marking need BPF classification (%v): not applied", e.clsErr)
		}
		return nil
	}
	for _, c := range sp.Classes {
		if c.ClassID>>16 != Major || c.Lane == "" {
			return fmt.Errorf("%w: socket plan: bad class %+v", ErrBadPlan, c)
		}
	}
	if t := sp.LedbatTarget; t != 0 && (t < lane.MinLedbatTarget || t > lane.MaxLedbatTarget) {
		return fmt.Errorf("%w: socket plan: ledbat target %v outside %v..%v", ErrBadPlan, t, lane.MinLedbatTarget, lane.MaxLedbatTarget)
	}
	sp.Classes = append([]Class(nil), sp.Classes...)
	e.sock = &sp
	e.setLedbatTarget()
	if err := e.syncLaneFlags(nil); err != nil {
		return fmt.Errorf("apply sockets: %w", err)
	}
	if e.marks() {
		e.loadSockmark()
	}
	if e.mark != nil {
		for _, b := range e.bound {
			e.attachSockmark(b.dir)
		}
	}
	if err := e.refreshBindings(); err != nil {
		return fmt.Errorf("apply sockets: %w", err)
	}
	return nil
}

// marks reports whether some plan marks a lane.
func (e *Enforcer) marks() bool {
	if e.sock != nil {
		for _, c := range e.sock.Classes {
			if c.Mark {
				return true
			}
		}
	}
	return false
}

// syncLaneFlags writes lane_flags from every plan: the trees' (cur, the
// plan being applied, in place of its interface's current one) and the
// socket plan, and deletes the entries of classes none of them has.
func (e *Enforcer) syncLaneFlags(cur *Plan) error {
	want := map[uint32]uint32{}
	add := func(c Class) {
		f := want[c.ClassID]
		if c.Idle {
			f |= laneFlagIdle
		}
		if c.Mark {
			f |= laneFlagMarkLE
		}
		if c.Quiet {
			f |= laneFlagQuiet
		}
		if c.CC == lane.CCLedbat && e.ledbatUsable() {
			f |= laneFlagLedbat
		}
		if c.CC == lane.CCLedbat {
			f |= laneFlagRecv
		}
		want[c.ClassID] = f
	}
	for iface, st := range e.ifaces {
		if cur != nil && iface == cur.Iface {
			continue
		}
		for _, c := range st.plan.Classes {
			add(c)
		}
	}
	if cur != nil {
		for _, c := range cur.Classes {
			add(c)
		}
	}
	if e.sock != nil {
		for _, c := range e.sock.Classes {
			add(c)
		}
	}
	var stale []uint32
	var k, v uint32
	it := e.objs.LaneFlags.Iterate()
	for it.Next(&k, &v) {
		if want[k] == 0 {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("lane flags: %w", err)
	}
	for _, k := range stale {
		if err := e.objs.LaneFlags.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("lane flags of class %x: %w", k, err)
		}
	}
	recv := false
	for cls, f := range want {
		if f == 0 {
			continue
		}
		if err := e.objs.LaneFlags.Put(cls, f); err != nil {
			return fmt.Errorf("lane flags of class %x: %w", cls, err)
		}
		recv = recv || f&laneFlagRecv != 0
	}
	if recv {
		e.startRecv()
	}
	return nil
}

// loadSockmark loads the UDP marking programs on first use. A failure is
// remembered and logged once: UDP sockets then leave unmarked where no
// tree marks their packets.
func (e *Enforcer) loadSockmark() {
	if e.mark != nil || e.markErr != nil {
		return
	}
	err := netprobe.HaveSockAddrSetsockopt()
	if err == nil {
		var objs lanesbpf.SockmarkObjects
		opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{"lane_flags": e.objs.LaneFlags, "auto_label": e.objs.AutoLabel}}
		if err = lanesbpf.LoadSockmarkObjects(&objs, opts); err == nil {
			e.mark = &objs
			return
		}
		err = fmt.Errorf("load the UDP marking programs: %w", err)
	}
	e.markErr = err
	e.logf("netsched: UDP sockets of marked lanes are not marked DSCP LE themselves: %v", err)
}

// attachSockmark attaches the UDP marking programs to a lane's cgroup.
// Without them its UDP sockets leave unmarked where no tree marks them:
// logged, not an error.
func (e *Enforcer) attachSockmark(dir string) {
	if e.mark == nil || e.markLinks[dir] != nil {
		return
	}
	var ls []link.Link
	for _, a := range []struct {
		at   ebpf.AttachType
		prog *ebpf.Program
	}{
		{ebpf.AttachCGroupInet4Connect, e.mark.LanesConnect4},
		{ebpf.AttachCGroupInet6Connect, e.mark.LanesConnect6},
		{ebpf.AttachCGroupUDP4Sendmsg, e.mark.LanesSendmsg4},
		{ebpf.AttachCGroupUDP6Sendmsg, e.mark.LanesSendmsg6},
	} {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: dir, Attach: a.at, Program: a.prog})
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			e.logf("netsched: attach UDP marking to %s: %v (its UDP sockets are not marked themselves)", dir, err)
			return
		}
		ls = append(ls, l)
	}
	e.markLinks[dir] = ls
}

func (e *Enforcer) detachSockmark(dir string) error {
	ls, ok := e.markLinks[dir]
	if !ok {
		return nil
	}
	delete(e.markLinks, dir)
	var errs []error
	for _, l := range ls {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("detach UDP marking from %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// closeSockmark detaches and unloads the UDP marking programs.
func (e *Enforcer) closeSockmark() []error {
	var errs []error
	for dir := range e.markLinks {
		if err := e.detachSockmark(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if e.mark != nil {
		if err := e.mark.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close UDP marking programs: %w", err))
		}
		e.mark = nil
	}
	return errs
}

// classMarked reports whether lane_flags marks class cls.
func (e *Enforcer) classMarked(cls uint32) bool {
	var f uint32
	if err := e.objs.LaneFlags.Lookup(cls, &f); err != nil {
		return false
	}
	return f&laneFlagMarkLE != 0
}

// moveMark gives the socket fd (another process's, duplicated) the DSCP
// of its new class: LE in a marked lane, none when it leaves one with
// lanes' LE. A DSCP other than LE, or LE in a socket whose class is not
// marked but was never lanes' (fromMarked false), is the program's and is
// kept. It says whether it changed anything.
func (e *Enforcer) moveMark(fd int, cls uint32, fromMarked bool) (bool, error) {
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return false, fmt.Errorf("get SO_DOMAIN: %w", err)
	}
	want := e.classMarked(cls)
	changed := false
	opts := [][2]int{{unix.SOL_IP, unix.IP_TOS}}
	if domain == unix.AF_INET6 {
		opts = [][2]int{{unix.SOL_IPV6, unix.IPV6_TCLASS}, {unix.SOL_IP, unix.IP_TOS}}
	}
	for i, o := range opts {
		tos, err := unix.GetsockoptInt(fd, o[0], o[1])
		if err != nil {
			if i > 0 {
				continue // IP_TOS on an IPv6-only socket
			}
			return changed, fmt.Errorf("get DSCP: %w", err)
		}
		tos = max(tos, 0) // IPV6_TCLASS: -1 is the default
		dscp := tos >> 2
		var next int
		switch {
		case want && dscp == 0:
			next = dscpLE<<2 | tos&3
		case !want && fromMarked && dscp == dscpLE:
			next = tos & 3
		default:
			continue
		}
		if err := unix.SetsockoptInt(fd, o[0], o[1], next); err != nil {
			if i > 0 {
				continue
			}
			return changed, fmt.Errorf("set DSCP: %w", err)
		}
		changed = true
	}
	return changed, nil
}

// dscpLE is RFC 8622's lower-effort per-hop behaviour.
const dscpLE = 1

// clearLaneFlags deletes every lane_flags entry.
func (e *Enforcer) clearLaneFlags() error {
	var keys []uint32
	var k, v uint32
	it := e.objs.LaneFlags.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("lane flags: %w", err)
	}
	for _, k := range keys {
		if err := e.objs.LaneFlags.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("lane flags of class %x: %w", k, err)
		}
	}
	return nil
}

// setLedbatTarget gives the socket plan's ledbat target to lanes_ledbat
// (when this process registered it) and to the receive side, as far as
// they are loaded (ledbatUsable and startRecv call it again when they
// load). A failure is logged: the programs keep the target they had.
func (e *Enforcer) setLedbatTarget() {
	if e.sock == nil || e.sock.LedbatTarget == 0 {
		return
	}
	t := e.sock.LedbatTarget
	if e.ledbat != nil && !e.ledbat.Shared() {
		if err := e.ledbat.SetTarget(t); err != nil {
			e.logf("netsched: %v", err)
		}
	}
	if e.recv != nil {
		if err := e.recv.objs.TargetUs.Set(uint32(t / time.Microsecond)); err != nil {
			e.logf("netsched: set the receive side's ledbat target: %v", err)
		}
	}
}

package netsched

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/monoclock"
	"github.com/lanes-qos/lanes/internal/netnsrun"
)

// Idletime on the network (seed 003's preemption intervals), the kernel
// side. An idletime lane's leaf is a TBF over a byte FIFO (LeafTbf).
// Released, the TBF's rate is far above the link's, so only HTB shapes the
// lane. A gate holds the lane by changing the TBF to 8 bit/s: its dequeue
// stops at once (TBF's tokens are reset on every change, so the change
// back leaves no token debt, unlike an HTB class whose ceiling is
// lowered). The held burst still admits one full-sized packet: the packet
// the TBF had tokens for when the hold came may still leave. Nothing runs
// the root qdisc after a release when every sender waits (a UDP sender on
// its socket buffer, TCP for ACKs), so Release then sends one frame of
// ethertype 0x88B5 (IEEE local experimental) from the device to its own
// MAC address with an AF_PACKET socket: its enqueue runs the root qdisc.
// (On an IFB the frame is dropped by the IFB after the tree sent it.)
//
// The classifiers (bpf/lanes.c) stamp each gate's last foreground and
// background packet in an mmapable array that the gates read and write
// through shared memory, and report the first foreground packet after a
// Release as an idletime.Event through a ring buffer.

const (
	dirEgress  = 0 // struct idle_key.dir
	dirIngress = 1
	maxGates   = 64 // MAX_GATES in lanes.c

	laneFlagIdle   = 1 // LANE_F_IDLE
	laneFlagMarkLE = 2 // LANE_F_MARK_LE
	laneFlagQuiet  = 4 // LANE_F_QUIET

	// kickEthertype is IEEE 802 local experimental ethertype 1.
	kickEthertype = 0x88B5
)

// TBF parameters: released, far above any link rate and with a burst
// larger than any GSO or GRO packet; held, 8 bit/s with a burst that still
// admits a full frame (larger packets are segmented by TBF).
const (
	releasedMinRate  = 10_000_000_000 / 8 // bytes/s
	releasedMinBurst = 4 << 20
	heldRate         = 1 // bytes/s
	heldMinBurst     = 1600
)

// gateMem is struct idle_gate as the program writes it; the gates access
// it through the mmap of the idle_gates array with atomic operations.
type gateMem struct {
	LastFg   uint64
	LastBg   uint64
	FgPkts   uint64
	BgPkts   uint64
	Events   uint64
	Open     uint32
	RttUs    uint32
	SrttUs   uint32
	_        uint32
	LastFull uint64 // the last foreground packet of at least IDLE_FULL_LEN bytes
}

// The layout must match the generated struct exactly.
var (
	_ [unsafe.Sizeof(gateMem{}) - unsafe.Sizeof(lanesbpf.LanesIdleGate{})]byte
	_ [unsafe.Sizeof(lanesbpf.LanesIdleGate{}) - unsafe.Sizeof(gateMem{})]byte
)

const gateStride = unsafe.Sizeof(gateMem{}) // array elements are 8-byte aligned; 64 is a multiple of 8

// idleEvent is struct idle_event.
type idleEvent struct {
	Ts      uint64
	Ifindex uint32
	Dir     uint32
	Slot    uint32
	Pad     uint32
}

const idleEventSize = int(unsafe.Sizeof(idleEvent{}))

// tbfLeaf is one idletime leaf a gate changes.
type tbfLeaf struct {
	class, handle uint32
	limit         uint32
}

// netGate is one interface direction's idletime gate; it implements
// idletime.Gate.
type netGate struct {
	e    *Enforcer
	name string
	dir  uint32
	key  int // ifindex of the shaped device (the map key)
	slot uint32
	mem  *gateMem

	mu      sync.Mutex
	tree    int // ifindex of the device whose tree has the leaves (the device, or its IFB)
	leaves  []tbfLeaf
	hold    [][]byte // netlink requests: every leaf's TBF held
	release [][]byte // ... released
	batch   []byte   // the requests of one call, sent at once
	nlfd    int
	pktfd   int
	kick    unix.SockaddrLinklayer
	frame   []byte
	seq     uint32
	held    bool
	heldAt  idletime.Mono // when the last hold's netlink batch was acknowledged
	closed  bool

	// spacing is Spacing's answer (ns), set from the direction's link
	// rate whenever that changes (syncIdle, changeLink).
	spacing atomic.Int64
}

var (
	_ idletime.Gate   = (*netGate)(nil)
	_ idletime.Spacer = (*netGate)(nil)
)

// Spacing is the shortest PI that spans the gaps of a foreground keeping
// the direction busy at its current rate (gateSpacing), while a busy
// sender's packets come: a foreground packet of at least fullPacket bytes
// passed within that span. Without one (probes, pings, ACKs alone) it is
// 0: small packets a few milliseconds apart leave the link idle, and
// stretching the PI after each would hold the background off it.
func (g *netGate) Spacing() time.Duration {
	floor := time.Duration(g.spacing.Load())
	full := idletime.Mono(atomic.LoadUint64(&g.mem.LastFull))
	if floor == 0 || full == 0 || monoNow()-full >= idletime.Mono(floor) {
		return 0
	}
	return floor
}

// fullPacket is IDLE_FULL_LEN in lanes.c.
const fullPacket = 1000

// setSpacing sets the gate's spacing for the direction's link rate under
// plan p and the queue the link's controller holds at a bottleneck beyond
// lanes (SetBottleneckQueue).
func (g *netGate) setSpacing(rate uint64, p Plan, queue time.Duration) {
	g.spacing.Store(int64(min(max(gateSpacing(rate, segmentCap(p.Rate)), queue), maxSpacing)))
}

// Name is "iface/egress" or "iface/ingress".
func (g *netGate) Name() string { return g.name }

// Hold stops the direction's idletime lanes from dequeuing: it closes the
// gate (no event for later foreground packets) and changes each lane's TBF
// to 8 bit/s, in one netlink batch. A held gate is only closed: the TBFs
// are already held (by an earlier Hold, or by the event reader).
func (g *netGate) Hold() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("hold %s: gate removed", g.name)
	}
	atomic.StoreUint32(&g.mem.Open, 0)
	if g.held {
		return nil // held by the event reader (or twice by the controller)
	}
	if err := g.send(g.hold); err != nil {
		return fmt.Errorf("hold %s: %w", g.name, err)
	}
	g.held, g.heldAt = true, monoNow()
	return nil
}

// Release opens the gate (the next foreground packet is reported as an
// Event), changes each idletime lane's TBF back to its released rate, and
// kicks the device's root qdisc. The gate opens first: a foreground packet
// that comes while the lanes are being released is reported, not lost.
func (g *netGate) Release() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("release %s: gate removed", g.name)
	}
	atomic.StoreUint32(&g.mem.Open, 1)
	if err := g.send(g.release); err != nil {
		return fmt.Errorf("release %s: %w", g.name, err)
	}
	g.held = false
	if err := unix.Sendto(g.pktfd, g.frame, 0, &g.kick); err != nil {
		return fmt.Errorf("release %s: kick the root qdisc: %w", g.name, err)
	}
	return nil
}

// LastForeground is the kernel's time stamp of the last foreground packet.
func (g *netGate) LastForeground() (idletime.Mono, error) {
	return idletime.Mono(atomic.LoadUint64(&g.mem.LastFg)), nil
}

// LastBackground is the kernel's time stamp of the last background packet.
func (g *netGate) LastBackground() (idletime.Mono, error) {
	return idletime.Mono(atomic.LoadUint64(&g.mem.LastBg)), nil
}

// rtt is the gate's average foreground TCP minimum RTT, or with smoothed
// their smoothed RTT.
func (g *netGate) rtt(smoothed bool) time.Duration {
	us := &g.mem.RttUs
	if smoothed {
		us = &g.mem.SrttUs
	}
	return time.Duration(atomic.LoadUint32(us)) * time.Microsecond
}

// send writes netlink requests in one batch and waits for one
// acknowledgement per request. Requests are numbered from a fresh sequence
// number, so that acknowledgements left over from a failed call are
// skipped.
func (g *netGate) send(msgs [][]byte) error {
	n := len(msgs)
	if n == 0 {
		return nil
	}
	first := g.seq + 1
	g.batch = g.batch[:0]
	for i, m := range msgs {
		binary.NativeEndian.PutUint32(m[8:], first+uint32(i)) // nlmsghdr.nlmsg_seq
		g.batch = append(g.batch, m...)
	}
	g.seq += uint32(n)
	if err := unix.Sendto(g.nlfd, g.batch, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	var buf [4096]byte
	var errs []error
	for acked := 0; acked < n; {
		r, _, err := unix.Recvfrom(g.nlfd, buf[:], 0)
		if err != nil {
			return fmt.Errorf("netlink receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:r])
		if err != nil {
			return fmt.Errorf("netlink parse: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || m.Header.Seq < first || m.Header.Seq > g.seq || len(m.Data) < 4 {
				continue
			}
			acked++
			if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
				l := g.leaves[m.Header.Seq-first]
				errs = append(errs, fmt.Errorf("change tbf %x: of class %x:%x: %w", l.handle>>16, l.class>>16, l.class&0xffff, unix.Errno(-code)))
			}
		}
	}
	return errors.Join(errs...)
}

// close frees the gate's slot and sockets.
func (g *netGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	atomic.StoreUint32(&g.mem.Open, 0)
	unix.Close(g.nlfd)
	unix.Close(g.pktfd)
}

// tbfMsg is a netlink request changing a TBF leaf (tc qdisc change).
func tbfMsg(ifindex int, l tbfLeaf, rate uint64, burst uint32) []byte {
	req := nl.NewNetlinkRequest(unix.RTM_NEWQDISC, unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifindex), Handle: l.handle, Parent: l.class})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated("tbf")))
	req.AddData(tbfOptions(rate, burst, l.limit))
	return req.Serialize()
}

// tbfOptions is TBF's TCA_OPTIONS: rate (bytes/s) and burst (bytes), and
// the byte limit of its FIFO child.
func tbfOptions(rate uint64, burst, limit uint32) *nl.RtAttr {
	opt := nl.TcTbfQopt{Limit: limit}
	opt.Rate.Linklayer = nl.LINKLAYER_ETHERNET
	if rate >= 1<<32 {
		opt.Rate.Rate = ^uint32(0)
	} else {
		opt.Rate.Rate = uint32(rate)
	}
	opts := nl.NewRtAttr(nl.TCA_OPTIONS, nil)
	opts.AddRtAttr(nl.TCA_TBF_PARMS, opt.Serialize())
	if rate >= 1<<32 {
		opts.AddRtAttr(nl.TCA_TBF_RATE64, nl.Uint64Attr(rate))
	}
	opts.AddRtAttr(nl.TCA_TBF_BURST, nl.Uint32Attr(burst))
	return opts
}

// releasedTbf returns a leaf's released rate (bytes/s: 10 Gbit/s, or twice
// the lane's ceiling when that is more) and burst.
func releasedTbf(c Class) (uint64, uint32) {
	return max(releasedMinRate, c.Ceil/4), max(releasedMinBurst, c.Limit)
}

// heldBurst is the held TBF's burst on a device of this MTU.
func heldBurst(mtu int) uint32 { return max(heldMinBurst, uint32(mtu)+32) }

// socketIn opens a socket in network namespace ns (none: the caller's).
func socketIn(ns netns.NsHandle, domain, typ, proto int) (int, error) {
	fd := -1
	err := netnsrun.In(ns, func() error {
		var err error
		fd, err = unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
		return err
	})
	return fd, err
}

// newGate opens a gate's sockets and takes a free slot.
func (e *Enforcer) newGate(name string, key int, dir uint32) (*netGate, error) {
	slot := -1
	for i, used := range e.slots {
		if !used {
			slot = i
			break
		}
	}
	if slot < 0 {
		return nil, fmt.Errorf("idletime gate %s: all %d gates in use", name, maxGates)
	}
	nlfd, err := socketIn(e.ns, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("idletime gate %s: netlink socket: %w", name, err)
	}
	// A kernel that never answers must not hang the controller.
	tv := unix.NsecToTimeval(int64(time.Second))
	_ = unix.SetsockoptTimeval(nlfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	pktfd, err := socketIn(e.ns, unix.AF_PACKET, unix.SOCK_DGRAM, 0)
	if err != nil {
		unix.Close(nlfd)
		return nil, fmt.Errorf("idletime gate %s: packet socket for the kick: %w", name, err)
	}
	g := &netGate{
		e: e, name: name, dir: dir, key: key, slot: uint32(slot),
		mem:  (*gateMem)(unsafe.Pointer(&e.gateMem[uintptr(slot)*gateStride])),
		nlfd: nlfd, pktfd: pktfd,
		frame: make([]byte, 46), // the minimum Ethernet payload
	}
	*g.mem = gateMem{}
	k := lanesbpf.LanesIdleKey{Ifindex: uint32(key), Dir: dir}
	if err := e.objs.IdleSlot.Put(&k, uint32(slot)); err != nil {
		g.close()
		return nil, fmt.Errorf("idletime gate %s: map its slot: %w", name, err)
	}
	e.slots[slot] = true
	return g, nil
}

// removeGate closes a gate and frees its slot.
func (e *Enforcer) removeGate(g *netGate) error {
	if g == nil {
		return nil
	}
	g.close()
	e.slots[g.slot] = false
	k := lanesbpf.LanesIdleKey{Ifindex: uint32(g.key), Dir: g.dir}
	if err := e.objs.IdleSlot.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("idletime gate %s: unmap: %w", g.name, err)
	}
	return nil
}

// configure points a gate at the idletime leaves of p in tree (the
// device's, or its IFB's, whose FIFOs hold at least minFifo bytes) and
// rebuilds its netlink batches. A held gate is held again: Apply has just
// built the leaves released.
func (g *netGate) configure(tree netlink.Link, p Plan, minFifo uint32) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := tree.Attrs()
	g.tree = a.Index
	g.leaves = g.leaves[:0]
	g.hold, g.release = nil, nil
	for _, c := range p.Classes {
		if !c.Idle {
			continue
		}
		c.Limit = max(c.Limit, minFifo)
		rate, burst := releasedTbf(c)
		l := tbfLeaf{class: c.ClassID, handle: c.LeafHandle, limit: c.Limit}
		g.leaves = append(g.leaves, l)
		g.hold = append(g.hold, tbfMsg(a.Index, l, heldRate, heldBurst(a.MTU)))
		g.release = append(g.release, tbfMsg(a.Index, l, rate, burst))
	}
	g.kick = unix.SockaddrLinklayer{Protocol: htons(kickEthertype), Ifindex: a.Index, Halen: uint8(min(len(a.HardwareAddr), 8))}
	copy(g.kick.Addr[:], a.HardwareAddr)
	if g.held {
		if err := g.send(g.hold); err != nil {
			return fmt.Errorf("hold %s again: %w", g.name, err)
		}
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// syncIdle brings the classifier maps and the interface's gates in line
// with its plan, after Apply built the tree.
func (e *Enforcer) syncIdle(dev netlink.Link, st *ifaceState, p Plan) error {
	if e.objs == nil {
		if p.Idle() || p.Follow != 0 {
			return fmt.Errorf("idletime: %w", e.clsErr)
		}
		return nil
	}
	if err := e.syncLaneFlags(&p); err != nil {
		return fmt.Errorf("idletime: %w", err)
	}
	idx := uint32(dev.Attrs().Index)
	if p.Follow != 0 && p.Ingress {
		if err := e.objs.FollowOfDev.Put(idx, p.Follow); err != nil {
			return fmt.Errorf("idletime: follow on %s: %w", p.Iface, err)
		}
	} else if err := e.objs.FollowOfDev.Delete(idx); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("idletime: follow off on %s: %w", p.Iface, err)
	}
	if !p.Idle() {
		return e.closeGates(st)
	}
	if e.gateMem == nil {
		return fmt.Errorf("idletime on %s: %w", p.Iface, e.idleErr)
	}
	if st.gates[dirEgress] == nil {
		g, err := e.newGate(p.Iface+"/"+Egress, dev.Attrs().Index, dirEgress)
		if err != nil {
			return err
		}
		st.gates[dirEgress] = g
	}
	if err := st.gates[dirEgress].configure(dev, p, uploadFloor(dev, st)); err != nil {
		return err
	}
	st.gates[dirEgress].setSpacing(e.linkOf(p, false), p, e.bneckQ[dirEgress])
	if !p.Ingress {
		err := e.removeGate(st.gates[dirIngress])
		st.gates[dirIngress] = nil
		return err
	}
	ifb, err := e.h.LinkByName(st.ifb)
	if err != nil {
		return fmt.Errorf("idletime: ifb %s: %w", st.ifb, err)
	}
	if st.gates[dirIngress] == nil {
		g, err := e.newGate(p.Iface+"/"+Ingress, dev.Attrs().Index, dirIngress)
		if err != nil {
			return err
		}
		st.gates[dirIngress] = g
	}
	if err := st.gates[dirIngress].configure(ifb, p, ingressFloor(dev, st)); err != nil {
		return err
	}
	st.gates[dirIngress].setSpacing(e.linkOf(p, true), p, e.bneckQ[dirIngress])
	return nil
}

// closeGates removes an interface's gates.
func (e *Enforcer) closeGates(st *ifaceState) error {
	var errs []error
	for i, g := range st.gates {
		if g != nil {
			errs = append(errs, e.removeGate(g))
			st.gates[i] = nil
		}
	}
	return errors.Join(errs...)
}

// IdleGates returns the idletime gates of iface: its upload (egress)
// gate, then, when the plan shapes downloads, its download gate on the
// IFB. An interface whose plan has no idletime lane has none. The gates
// stay valid across Apply calls that keep idletime lanes on the
// interface; Remove, or a plan without them, retires them (their methods
// then fail).
func (e *Enforcer) IdleGates(iface string) ([]idletime.Gate, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.ifaces[iface]
	if st == nil {
		return nil, fmt.Errorf("idletime gates of %s: no plan applied", iface)
	}
	return st.gateList(), nil
}

func (st *ifaceState) gateList() []idletime.Gate {
	var gs []idletime.Gate
	for _, g := range st.gates {
		if g != nil {
			gs = append(gs, g)
		}
	}
	return gs
}

// AllIdleGates returns the idletime gates of every interface with a plan,
// interfaces sorted by name, each as IdleGates orders them. Event.Gate of
// IdleEvents called without gates indexes this slice.
func (e *Enforcer) AllIdleGates() []idletime.Gate {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.allGatesLocked()
}

func (e *Enforcer) allGatesLocked() []idletime.Gate {
	names := make([]string, 0, len(e.ifaces))
	for n := range e.ifaces {
		names = append(names, n)
	}
	sort.Strings(names)
	var gs []idletime.Gate
	for _, n := range names {
		gs = append(gs, e.ifaces[n].gateList()...)
	}
	return gs
}

// ForegroundRTT is the average minimum RTT of the foreground TCP
// connections whose packets iface carried (the larger of its directions'
// averages; each an EWMA of gain 1/8 over packets), or with smoothed the
// average of their smoothed RTTs, for the "auto" PI length. 0 when none
// was seen or the interface has no gates.
func (e *Enforcer) ForegroundRTT(iface string, smoothed bool) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.ifaces[iface]
	if st == nil {
		return 0
	}
	var d time.Duration
	for _, g := range st.gates {
		if g != nil {
			d = max(d, g.rtt(smoothed))
		}
	}
	return d
}

// IdleEvents reports foreground packets on released gates: the first
// foreground packet after each Release of a gate, exactly once. Event.Gate
// is the index of the gate in gates, which must come from IdleGates or
// AllIdleGates; without gates, in AllIdleGates() as it is at this call.
// Events of other gates are dropped. The reader runs on a goroutine locked
// to its OS thread (SCHED_FIFO with WithIdleReaderPriority) and, unless
// the Enforcer was made WithoutIdleAutoHold, holds the event's gate before
// it sends the event: a foreground packet on a released gate always starts
// a preemption interval, and this keeps the controller's goroutine off the
// path from the packet to the hold (its Hold then returns at once). A
// failed hold there is logged; the controller's Hold retries it. The
// channel closes when ctx ends, the Enforcer is closed or the ring buffer
// fails. One reader at a time: call again (after ending the old ctx) when the set of gates
// changed.
func (e *Enforcer) IdleEvents(ctx context.Context, gates ...idletime.Gate) (<-chan idletime.Event, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.objs == nil || e.gateMem == nil {
		return nil, fmt.Errorf("idletime events: %w", e.idleErr)
	}
	if e.evReading {
		return nil, fmt.Errorf("idletime events: %w", ErrIdleReaderRunning)
	}
	if len(gates) == 0 {
		gates = e.allGatesLocked()
	}
	index := map[uint32]int{}
	bySlot := map[uint32]*netGate{}
	for i, g := range gates {
		ng, ok := g.(*netGate)
		if !ok {
			return nil, fmt.Errorf("idletime events: gate %d (%s) is not a network gate", i, g.Name())
		}
		index[ng.slot] = i
		bySlot[ng.slot] = ng
	}
	autoHold, prio := !e.opts.noIdleAutoHold, e.opts.idleReaderPrio
	rd, err := ringbuf.NewReader(e.objs.IdleEvents)
	if err != nil {
		return nil, fmt.Errorf("idletime events: %w", err)
	}
	e.evReading = true
	ch := make(chan idletime.Event, 64)
	stop := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	e.evStop = cancel
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		rd.Close()
	}()
	go func() {
		runtime.LockOSThread()
		if prio > 0 {
			rt := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
			if err := unix.SchedSetAttr(0, &rt, 0); err != nil {
				e.logf("netsched: idletime event reader stays at normal priority: SCHED_FIFO %d: %v", prio, err)
				prio = 0
			}
		}
		defer func() {
			if prio > 0 {
				// The thread dies with the goroutine (locked, never
				// unlocked): it cannot take the policy elsewhere.
				return
			}
			runtime.UnlockOSThread()
		}()
		defer func() {
			// The reader is closed and the flag cleared before the
			// channel closes: a caller that saw the close may start
			// the next reader at once.
			rd.Close()
			e.mu.Lock()
			e.evReading = false
			e.mu.Unlock()
			close(stop)
			cancel()
			close(ch)
		}()
		var rec ringbuf.Record
		for {
			if err := rd.ReadInto(&rec); err != nil {
				if !errors.Is(err, ringbuf.ErrClosed) && !errors.Is(err, net.ErrClosed) {
					e.logf("netsched: idletime events: %v", err)
				}
				return
			}
			woke := monoNow()
			if len(rec.RawSample) < idleEventSize {
				continue
			}
			ev := (*idleEvent)(unsafe.Pointer(&rec.RawSample[0]))
			i, ok := index[ev.Slot]
			if !ok {
				continue
			}
			var held idletime.Mono
			if autoHold {
				if err := bySlot[ev.Slot].Hold(); err != nil {
					e.logf("netsched: idletime event reader: %v", err)
				} else {
					held = monoNow()
				}
			}
			select {
			case ch <- idletime.Event{Gate: i, At: idletime.Mono(ev.Ts), Held: held, Woke: woke}:
			case <-ctx.Done():
				return
			}
			// The receiver was readied on this thread's P, which the
			// blocking epoll_wait of the next read would keep until the
			// runtime's monitor takes it back (up to milliseconds):
			// yielding hands the P, and the receiver, to another thread.
			runtime.Gosched()
		}
	}()
	return ch, nil
}

// monoNow returns the CLOCK_MONOTONIC time, the clock of the kernel's
// stamps.
func monoNow() idletime.Mono { return idletime.Mono(monoclock.Now()) }

// idleGateStats are a gate's kernel counters (tests, debugging).
type idleGateStats struct {
	FgPkts, BgPkts, Events uint64
	Open                   bool
}

func (g *netGate) stats() idleGateStats {
	return idleGateStats{
		FgPkts: atomic.LoadUint64(&g.mem.FgPkts),
		BgPkts: atomic.LoadUint64(&g.mem.BgPkts),
		Events: atomic.LoadUint64(&g.mem.Events),
		Open:   atomic.LoadUint32(&g.mem.Open) != 0,
	}
}

// mapGates mmaps the gates' array, or says why it cannot.
func (e *Enforcer) mapGates() error {
	size := int(maxGates * gateStride)
	mem, err := unix.Mmap(e.objs.IdleGates.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap the idletime gates: %w", err)
	}
	e.gateMem = mem
	return nil
}

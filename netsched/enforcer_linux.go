package netsched

import (
	"context"
	"errors"
	"fmt"
	"github.com/lanes-qos/lanes/internal/netprobe"
	"math"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/ledbat"
	"github.com/lanes-qos/lanes/state"
)

// Enforcer applies Plans to interfaces and classifies sockets by lane. It is
// safe for concurrent use.
type Enforcer struct {
	logf func(string, ...any)
	h    *netlink.Handle
	ns   netns.NsHandle // -1: the caller's namespace

	leaf    LeafKind
	fqErr   error // why fq_codel leaves are not used
	htbErr  error
	clsErr  error // why the BPF classifier is unavailable, nil if it is
	ingErr  error // why download shaping is unavailable, nil if it is
	idleErr error // why idletime gates are unavailable, nil if they are
	rxErr   error // why download receive windows cannot be bounded, nil if they can
	ports   portState
	refused map[string]error // interfaces whose root is kept: why (ErrRootNotRestorable)

	mu      sync.Mutex
	objs    *lanesbpf.LanesObjects
	ifaces  map[string]*ifaceState
	cgLinks map[string]link.Link // cgroup dir -> sock_create attachment
	// opsLinks: cgroup dir -> sock_ops attachment (net.cc, cc_linux.go).
	opsLinks  map[string]link.Link
	ledbat    *ledbat.Registration // lanes_ledbat, once a plan asked for it
	ledbatErr error                // why lanes_ledbat could not be registered
	ccDefault string               // the host's default congestion control
	// sock is the socket plan (ApplySockets, sockets_linux.go); nil: none.
	sock *SocketPlan
	// mark: the UDP marking programs (bpf/sockmark.c), loaded once a
	// socket plan marks a lane; markErr: why they could not be;
	// markLinks: cgroup dir -> their attachments.
	mark      *lanesbpf.SockmarkObjects
	markErr   error
	markLinks map[string][]link.Link
	// recv runs the receive-side background (rledbat_linux.go) once a
	// lane asks for ledbat; recvErr: why it cannot.
	recv    *recvRunner
	recvErr error
	bound   map[string]boundLane // lane -> its cgroup
	// tuned holds controllers' run-time changes of lanes' classes
	// (tune_linux.go), which buildTree keeps.
	tuned map[tuneKey]rates
	// link holds the auto rate's link rates (linkrate_linux.go) by
	// direction, 0: the plan's.
	link [2]uint64
	// bneckQ is, by direction, the queue the link's controller holds at
	// a bottleneck beyond lanes (SetBottleneckQueue), 0: none known.
	bneckQ [2]time.Duration
	// quietTC silences the tc change lines (tcLogf) while the link rate
	// moves: the controller publishes its decisions instead.
	quietTC bool
	closed  bool

	opts      options
	gateMem   []byte         // the idle_gates array, mmapped
	slots     [maxGates]bool // idle_gates slots in use
	evReading bool           // an IdleEvents reader runs
	evStop    func()         // stops it (Close)
}

type boundLane struct {
	dir  string
	cgid uint64
}

// ifaceState is what the Enforcer built on one interface.
type ifaceState struct {
	plan        Plan
	orig        netlink.Qdisc // the root qdisc found before lanes, nil if the kernel's default
	snap        *TreeSnapshot // its whole tree (snapshot_linux.go), nil if the kernel's default
	lossy       error         // why snap is not known to come back as found (replaced anyway)
	addedClsact bool
	ifb         string // IFB device name, "" without ingress
	last        map[statKey]sample
	gates       [2]*netGate   // idletime gates by direction (dirEgress, dirIngress)
	sizes       *SegmentSizes // the device's segment sizes before lanes bounded them
	sizeErr     error         // why they could not be bounded
}

type statKey struct {
	dir     string
	classid uint32
}

type sample struct {
	bytes uint64
	at    time.Time
}

// New probes the kernel (HTB, fq_codel, clsact, IFB, the BPF program types
// and helpers lanes uses) and loads the classification programs. It fails
// only when HTB is missing; the other mechanisms degrade, as Mechanisms
// reports.
func New(logf func(string, ...any), opts ...Option) (*Enforcer, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	e := &Enforcer{
		opts:      o,
		logf:      logf,
		ns:        netns.None(),
		ifaces:    map[string]*ifaceState{},
		cgLinks:   map[string]link.Link{},
		opsLinks:  map[string]link.Link{},
		markLinks: map[string][]link.Link{},
		bound:     map[string]boundLane{},
		tuned:     map[tuneKey]rates{},
		refused:   map[string]error{},
	}
	var err error
	if o.netnsPath != "" {
		e.ns, err = netns.GetFromPath(o.netnsPath)
		if err != nil {
			return nil, fmt.Errorf("open netns %s: %w", o.netnsPath, err)
		}
		e.h, err = netlink.NewHandleAt(e.ns)
	} else {
		e.h, err = netlink.NewHandle()
	}
	if err != nil {
		e.closeNs()
		return nil, fmt.Errorf("open netlink: %w", err)
	}

	if e.htbErr = netprobe.HaveQdisc("htb"); e.htbErr != nil {
		e.Close()
		return nil, fmt.Errorf("network enforcement: %w", e.htbErr)
	}
	e.leaf, e.fqErr = LeafFqCodel, netprobe.HaveQdisc("fq_codel")
	if e.fqErr != nil {
		e.leaf = LeafHeadDrop
	}

	e.clsErr = firstErr(o.classifier.forced(), netprobe.HaveClassifierBPF())
	if e.clsErr == nil {
		var objs lanesbpf.LanesObjects
		if err := lanesbpf.LoadLanesObjects(&objs, nil); err != nil {
			e.clsErr = fmt.Errorf("load classification programs: %w", err)
		} else {
			e.objs = &objs
		}
	}
	e.idleErr = e.clsErr
	if e.objs != nil {
		e.idleErr = firstErr(netprobe.HaveQdisc("tbf"), e.mapGates())
	}
	e.ingErr = firstErr(e.clsErr, netprobe.HaveIngressBPF())
	e.rxErr = e.ingErr
	e.initPortRules()
	return e, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Leaf returns the leaf qdisc kind this kernel supports best; pass it to
// BuildPlan.
func (e *Enforcer) Leaf() LeafKind { return e.leaf }

// Mechanisms says, for `lanes doctor`, which backend each network
// mechanism uses on this host and why (the lines are netprobe.Net's, with
// the shaped links and the root trees lanes kept or replaced).
func (e *Enforcer) Mechanisms() []features.Mechanism {
	n := netprobe.Net{HTB: e.htbErr, FqCodel: e.fqErr, Classifier: e.clsErr, Ingress: e.ingErr, Idle: e.idleErr, Loaded: true}
	n.CC = firstErr(e.clsErr, netprobe.HaveStructOpsCC())
	e.mu.Lock()
	if e.ledbatErr != nil {
		n.CC = e.ledbatErr
	}
	n.CCRegistered = e.ledbat != nil
	n.Mark = firstErr(e.clsErr, e.markErr, netprobe.HaveSockAddrSetsockopt())
	n.MarkLoaded = e.mark != nil
	n.Recv = firstErr(e.clsErr, e.recvErr, netprobe.HaveTCPIter())
	n.RecvRunning = e.recv != nil
	e.mu.Unlock()
	if e.ports.ingress {
		n.Ingress = e.ports.ingWhy
	} else if e.ingErr != nil {
		n.IngressPorts = e.ingErr
	}
	var ifaces []features.Mechanism
	for _, f := range e.Links() {
		ifaces = append(ifaces, f.Mechanism())
	}
	return n.Mechanisms(append(ifaces, e.rootMechanisms()...)...)
}

// Close detaches the sock_create programs and releases the programs and
// maps. Trees and tc filters stay (Remove undoes them); the filters keep
// their programs alive.
func (e *Enforcer) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	if e.evStop != nil {
		e.evStop()
	}
	var errs []error
	if e.recv != nil {
		// Lift the clamps: with no lane asking, one last run gives every
		// socket it bounded its receive buffer's window back.
		errs = append(errs, e.clearLaneFlags())
		if err := e.runRecv(e.recv); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, e.recv.close())
		e.recv = nil
	}
	for dir, l := range e.cgLinks {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("detach sock_create from %s: %w", dir, err))
		}
	}
	e.cgLinks = nil
	errs = append(errs, e.closeLedbat()...)
	errs = append(errs, e.closeSockmark()...)
	for _, st := range e.ifaces {
		if err := e.closeGates(st); err != nil {
			errs = append(errs, err)
		}
	}
	if e.gateMem != nil {
		if err := unix.Munmap(e.gateMem); err != nil {
			errs = append(errs, fmt.Errorf("unmap the idletime gates: %w", err))
		}
		e.gateMem = nil
	}
	if e.objs != nil {
		if err := e.objs.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close bpf objects: %w", err))
		}
	}
	if e.h != nil {
		e.h.Close()
	}
	e.closeNs()
	return errors.Join(errs...)
}

func (e *Enforcer) closeNs() {
	if e.ns.IsOpen() {
		e.ns.Close()
	}
}

// validate checks a plan before anything touches the kernel.
func (p Plan) validate() error {
	if p.Iface == "" {
		return fmt.Errorf("%w: no interface", ErrBadPlan)
	}
	if p.Rate == 0 {
		return fmt.Errorf("%w: interface %s: zero rate", ErrBadPlan, p.Iface)
	}
	if len(p.Classes) == 0 {
		return fmt.Errorf("%w: interface %s: no classes", ErrBadPlan, p.Iface)
	}
	if p.RxWindow != 0 && (p.RxWindow < 1 || p.RxWindow > 16) {
		return fmt.Errorf("%w: interface %s: receive window gain %g outside 1..16", ErrBadPlan, p.Iface, p.RxWindow)
	}
	for _, c := range p.Classes {
		if c.ClassID>>16 != Major || c.Rate == 0 || c.Ceil < c.Rate || c.LeafHandle == 0 || (c.Leaf == LeafTbf && (c.Limit == 0 || !c.Idle)) {
			return fmt.Errorf("%w: interface %s: bad class %+v", ErrBadPlan, p.Iface, c)
		}
	}
	return nil
}

// Apply makes the interface's tree match p. It may be called repeatedly
// with identical input: a plan already in place issues no kernel
// operations. The first Apply on an interface replaces its root qdisc with
// lanes' HTB tree (handle Major:) and remembers the original. On any error
// Apply removes the whole tree, its classifiers and IFB, and puts the
// original root qdisc back: it never leaves a partial tree.
func (e *Enforcer) Apply(ctx context.Context, p Plan) error {
	if err := p.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("apply: enforcer closed")
	}
	if p.Ingress && e.ingErr != nil {
		return fmt.Errorf("apply %s: download shaping: %w", p.Iface, e.ingErr)
	}
	dev, err := e.h.LinkByName(p.Iface)
	if err != nil {
		return fmt.Errorf("apply: interface %s: %w", p.Iface, err)
	}
	st := e.ifaces[p.Iface]
	if st != nil && reflect.DeepEqual(st.plan, p) && e.rootIsOurs(dev) {
		return nil
	}
	// Record first, then change: here, after the original root tree is
	// known, and before the segment sizes are bounded (boundSegments).
	if err := e.record(p.Iface, p.Rate, st); err != nil {
		return fmt.Errorf("apply %s: %w", p.Iface, err)
	}
	if st == nil {
		st = &ifaceState{last: map[statKey]sample{}}
		if err := e.takeOriginal(dev, st, p); err != nil {
			if errors.Is(err, ErrRootNotRestorable) {
				e.refused[p.Iface] = err
			}
			e.unrecord(p.Iface)
			return fmt.Errorf("apply %s: %w", p.Iface, err)
		}
		delete(e.refused, p.Iface)
		// Adopting a crashed run's tree: a clsact holding lanes' filters
		// was lanes' (it goes once it is empty).
		st.addedClsact = hasLanesFilters(e, dev)
		if err := e.record(p.Iface, p.Rate, st); err != nil {
			e.unrecord(p.Iface)
			return fmt.Errorf("apply %s: %w", p.Iface, err)
		}
	}
	if err := e.apply(ctx, dev, st, p); err != nil {
		e.logf("netsched: apply %s failed, removing lanes' tree: %v", p.Iface, err)
		if rerr := e.teardown(dev, st); rerr != nil {
			err = errors.Join(err, fmt.Errorf("undo: %w", rerr))
		}
		delete(e.ifaces, p.Iface)
		e.unrecord(p.Iface)
		return fmt.Errorf("apply %s: %w", p.Iface, err)
	}
	p.Classes = slices.Clone(p.Classes) // the caller keeps its slice
	st.plan = p
	e.ifaces[p.Iface] = st
	if err := e.refreshBindings(); err != nil {
		return fmt.Errorf("apply %s: %w", p.Iface, err)
	}
	return nil
}

func (e *Enforcer) apply(ctx context.Context, dev netlink.Link, st *ifaceState, p Plan) error {
	if err := e.buildTree(dev, p, uploadFloor(dev, st), false); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.objs != nil {
		added, err := e.ensureClsact(dev)
		st.addedClsact = st.addedClsact || added
		if err != nil {
			return err
		}
		if err := e.replaceFilter(dev, netlink.HANDLE_MIN_EGRESS, e.objs.LanesEgress, "lanes_egress"); err != nil {
			return err
		}
	} else if err := e.dropBPFFilter(dev, netlink.HANDLE_MIN_EGRESS); err != nil {
		return err
	}
	if err := e.syncPortFilters(dev, p, Egress, e.ports.egress); err != nil {
		return err
	}
	if err := e.boundSegments(dev, st, p); err != nil {
		// Shaping works without it, at a cost in latency that lanes
		// doctor and status warn about.
		e.logf("netsched: %s: %v (its segments stay as large as they are)", p.Iface, err)
		st.sizeErr = err
	} else {
		st.sizeErr = nil
	}
	if err := e.syncRxWindow(dev, p); err != nil {
		return err
	}
	if !p.Ingress {
		if st.ifb != "" {
			if err := e.removeIngress(dev, st); err != nil {
				return err
			}
		}
		return e.syncIdle(dev, st, p)
	}
	name := fmt.Sprintf("%s%d", ifbPrefix, dev.Attrs().Index)
	ifb, err := e.h.LinkByName(name)
	if err != nil {
		e.logf("netsched: ip link add %s type ifb", name)
		if err := e.h.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: name, TxQLen: 1000}}); err != nil {
			return fmt.Errorf("create ifb %s: %w", name, err)
		}
		st.ifb = name
		if ifb, err = e.h.LinkByName(name); err != nil {
			return fmt.Errorf("find ifb %s: %w", name, err)
		}
	}
	st.ifb = name
	if err := e.h.LinkSetUp(ifb); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	if err := e.buildTree(ifb, p, ingressFloor(dev, st), true); err != nil {
		return fmt.Errorf("ifb %s: %w", name, err)
	}
	if err := e.syncPortFilters(ifb, p, Ingress, e.ports.ingress); err != nil {
		return fmt.Errorf("ifb %s: %w", name, err)
	}
	added, err := e.ensureClsact(dev)
	st.addedClsact = st.addedClsact || added
	if err != nil {
		return err
	}
	if e.ports.ingress {
		if err := e.dropBPFFilter(dev, netlink.HANDLE_MIN_INGRESS); err != nil {
			return err
		}
	} else if err := e.replaceFilter(dev, netlink.HANDLE_MIN_INGRESS, e.objs.LanesIngress, "lanes_ingress"); err != nil {
		return err
	}
	if err := e.ensureRedirect(dev, ifb); err != nil {
		return err
	}
	return e.syncIdle(dev, st, p)
}

// ensureRedirect makes the filter after lanes_ingress a u32 match-all
// with a mirred egress redirect to ifb.
func (e *Enforcer) ensureRedirect(dev, ifb netlink.Link) error {
	fs, err := e.h.FilterList(dev, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return fmt.Errorf("list ingress filters of %s: %w", dev.Attrs().Name, err)
	}
	for _, f := range fs {
		if u, ok := f.(*netlink.U32); ok && u.Priority == redirPrio {
			if u.RedirIndex == ifb.Attrs().Index {
				return nil
			}
			e.logf("netsched: tc filter del dev %s ingress prio %d u32", dev.Attrs().Name, redirPrio)
			if err := e.h.FilterDel(u); err != nil {
				return fmt.Errorf("delete stale redirect on %s: %w", dev.Attrs().Name, err)
			}
		}
	}
	u := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: dev.Attrs().Index,
			Parent:    netlink.HANDLE_MIN_INGRESS,
			Priority:  redirPrio,
			Protocol:  unix.ETH_P_ALL,
		},
		RedirIndex: ifb.Attrs().Index,
	}
	e.logf("netsched: tc filter add dev %s ingress prio %d u32 match u32 0 0 action mirred egress redirect dev %s", dev.Attrs().Name, redirPrio, ifb.Attrs().Name)
	if err := e.h.FilterAdd(u); err != nil {
		return fmt.Errorf("redirect %s to %s: %w", dev.Attrs().Name, ifb.Attrs().Name, hint(err))
	}
	return nil
}

// maxGRO is the largest packet GRO may build on dev: downloads reach the
// IFB in such aggregates.
func maxGRO(dev netlink.Link) uint32 {
	a := dev.Attrs()
	return max(a.GROMaxSize, a.GROIPv4MaxSize, superPacket)
}

// maxGSO is the largest packet the stack may hand to dev's qdiscs with
// segmentation offloads on (TCP sizes its TSO packets to about a
// millisecond at its pacing rate, which before the first round trips can
// be far above the shaped rate).
func maxGSO(dev netlink.Link) uint32 {
	a := dev.Attrs()
	return max(a.GSOMaxSize, a.GSOIPv4MaxSize, superPacket)
}

// fifoFloor is the least byte limit of an upload FIFO in front of a
// device whose largest packet is largest: three such packets. With less, a
// 64 KiB GSO packet is larger than the whole FIFO of a slow lane (47,500
// bytes at 19 Mbit/s and 20 ms) and every one is dropped; and a tail drop
// at the sender's own qdisc stalls its TCP (see LeafHeadDrop), so the FIFO
// takes the bursts that TCP small queues let a socket put in it.
func fifoFloor(largest uint32) uint32 { return 3 * largest }

// ingressFloor is the least byte limit of a download FIFO on dev's IFB:
// one GRO aggregate and a packet. A download's sender is remote, so a drop
// there is an ordinary loss to it, and a deeper FIFO only lets a
// background download queue more.
func ingressFloor(dev netlink.Link, st *ifaceState) uint32 {
	m := maxGRO(dev)
	if st.sizes != nil {
		m = max(m, st.sizes.GRO, st.sizes.GROIPv4)
	}
	return m + MTU
}

// uploadFloor is fifoFloor for dev's largest GSO packet: the one its
// sizes allowed before lanes bounded them, since sockets opened before
// keep it.
func uploadFloor(dev netlink.Link, st *ifaceState) uint32 {
	m := maxGSO(dev)
	if st.sizes != nil {
		m = max(m, st.sizes.GSO, st.sizes.GSOIPv4)
	}
	return fifoFloor(m)
}

// buildTree makes dev's root an HTB tree matching p, replacing classes and
// leaves in place and deleting lane classes p does not have. Byte FIFO
// leaves hold at least minFifo bytes. A download tree (an IFB) gets the
// classes' download leaves (Class.download).
func (e *Enforcer) buildTree(dev netlink.Link, p Plan, minFifo uint32, download bool) error {
	name := dev.Attrs().Name
	idx := dev.Attrs().Index
	root := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: ClassID(Major, 0)})
	root.Defcls = p.Default & 0xffff
	cur, err := e.rootQdisc(dev)
	if err != nil {
		return err
	}
	// HTB cannot change its options in place: keep a tree of ours whose
	// default class is right, rebuild one whose default changed.
	if h, ok := cur.(*netlink.Htb); !ok || h.Handle != root.Handle || h.Defcls != root.Defcls {
		if ok && h.Handle == root.Handle {
			e.logf("netsched: tc qdisc del dev %s root handle %x: (default class changed)", name, Major)
			if err := e.h.QdiscDel(root); err != nil {
				return fmt.Errorf("delete root qdisc of %s: %w", name, hint(err))
			}
		}
		e.logf("netsched: tc qdisc replace dev %s root handle %x: htb default %x", name, Major, root.Defcls)
		if err := e.h.QdiscReplace(root); err != nil {
			return fmt.Errorf("replace root qdisc of %s with htb: %w", name, hint(err))
		}
	}
	linkRate := e.linkOf(p, download)
	top := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: ClassID(Major, 0), Handle: ClassID(Major, rootMinor)},
		htbAttrs(linkRate, linkRate, 0))
	e.logf("netsched: tc class replace dev %s parent %x: classid %x:%x htb rate %d ceil %d burst %d cburst %d", name, Major, Major, rootMinor, linkRate, linkRate, htbBurst(linkRate), htbBurst(linkRate))
	if err := e.h.ClassReplace(top); err != nil {
		return fmt.Errorf("replace root class of %s: %w", name, hint(err))
	}
	want := map[uint32]bool{ClassID(Major, rootMinor): true}
	for _, c := range p.Classes {
		if download {
			c = c.download()
		}
		if r := e.effectiveRates(p, c, download); r != (rates{c.Rate, c.Ceil}) {
			c = c.withCeil(r.ceil)
			c.Rate = r.rate
		}
		want[c.ClassID] = true
		hc := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: ClassID(Major, rootMinor), Handle: c.ClassID},
			htbAttrs(c.Rate, c.Ceil, c.Prio))
		e.logf("netsched: tc class replace dev %s parent %x:%x classid %x:%x htb rate %d ceil %d burst %d cburst %d prio %d (lane %s)",
			name, Major, rootMinor, c.ClassID>>16, c.ClassID&0xffff, c.Rate, c.Ceil, htbBurst(c.Rate), htbBurst(c.Ceil), c.Prio, c.Lane)
		if err := e.h.ClassReplace(hc); err != nil {
			return fmt.Errorf("replace class of lane %s on %s: %w", c.Lane, name, hint(err))
		}
		if c.Leaf == LeafTbf || c.Leaf == LeafBfifo {
			c.Limit = max(c.Limit, minFifo)
		}
		if err := e.replaceLeaf(dev, c); err != nil {
			return err
		}
	}
	classes, err := e.h.ClassList(dev, ClassID(Major, 0))
	if err != nil {
		return fmt.Errorf("list classes of %s: %w", name, err)
	}
	for _, cl := range classes {
		id := cl.Attrs().Handle
		if id>>16 == Major && !want[id] {
			e.logf("netsched: tc class del dev %s classid %x:%x", name, id>>16, id&0xffff)
			if err := e.h.ClassDel(cl); err != nil {
				return fmt.Errorf("delete stale class %x:%x on %s: %w", id>>16, id&0xffff, name, err)
			}
		}
	}
	return nil
}

// quantum is every class's DRR quantum: one full packet, so that lanes of
// the same priority share by bytes regardless of their rates.
const quantum = MTU

// burstTime is how long a class's HTB buckets (burst and cburst) hold at
// their rates, and burstPackets how many bounded segments (minSegment) they hold
// at least. Without them, tc's and the netlink library's default on a
// high-resolution clock is rate/10⁹ + 1600 bytes: 0.67 ms at 19 Mbit/s,
// less than one bounded GSO packet, so that every time HTB's watchdog
// fires late (a VM's timers are often a millisecond or more late, this
// machine's up to tens of milliseconds under load) the tokens of the wait
// beyond the bucket are lost and a lone flow gets 47-80 % of the link
// (TestLoneFlow). A 5 ms bucket keeps them across such delays; what it
// costs is that a lane idle for 5 ms may send 5 ms of its ceiling at the
// device's speed, which the link's own queue absorbs.
const (
	burstTime    = 5 * time.Millisecond
	burstPackets = 2
)

// htbBurst is the bucket in bytes for a rate in bit/s.
func htbBurst(rate uint64) uint32 {
	b := rate / 8 * uint64(burstTime) / uint64(time.Second)
	return uint32(min(max(b, burstPackets*minSegment), math.MaxUint32/2))
}

// htbAttrs is an HTB class's attributes: rate and ceiling in bit/s, the
// priority, the quantum and buckets for both.
func htbAttrs(rate, ceil uint64, prio uint32) netlink.HtbClassAttrs {
	return netlink.HtbClassAttrs{Rate: rate, Ceil: ceil, Prio: prio, Quantum: quantum,
		Buffer: htbBurst(rate), Cbuffer: htbBurst(ceil)}
}

// tcLogf logs a tc change unless quietTC. Callers hold e.mu.
func (e *Enforcer) tcLogf(format string, args ...any) {
	if !e.quietTC {
		e.logf(format, args...)
	}
}

func (e *Enforcer) replaceLeaf(dev netlink.Link, c Class) error {
	name := dev.Attrs().Name
	attrs := netlink.QdiscAttrs{LinkIndex: dev.Attrs().Index, Parent: c.ClassID, Handle: c.LeafHandle}
	var err error
	switch c.Leaf {
	case LeafFqCodel:
		e.tcLogf("netsched: tc qdisc replace dev %s parent %x:%x handle %x: fq_codel target %s", name, c.ClassID>>16, c.ClassID&0xffff, c.LeafHandle>>16, c.Target)
		err = e.replaceFqCodel(attrs, c.Target, c.Limit)
	case LeafBfifo:
		e.tcLogf("netsched: tc qdisc replace dev %s parent %x:%x handle %x: bfifo limit %d", name, c.ClassID>>16, c.ClassID&0xffff, c.LeafHandle>>16, c.Limit)
		err = e.replaceFifo(attrs, string(LeafBfifo), c.Limit)
	case LeafHeadDrop:
		e.tcLogf("netsched: tc qdisc replace dev %s parent %x:%x handle %x: pfifo_head_drop limit %d", name, c.ClassID>>16, c.ClassID&0xffff, c.LeafHandle>>16, c.Limit)
		err = e.replaceFifo(attrs, string(LeafHeadDrop), c.Limit)
	case LeafTbf:
		rate, burst := releasedTbf(c)
		e.tcLogf("netsched: tc qdisc replace dev %s parent %x:%x handle %x: tbf rate %dbit burst %d limit %d (idletime lane, released)", name, c.ClassID>>16, c.ClassID&0xffff, c.LeafHandle>>16, rate*8, burst, c.Limit)
		err = e.replaceQdiscRaw(attrs, "tbf", tbfOptions(rate, burst, c.Limit))
	default:
		return fmt.Errorf("%w: lane %s: unknown leaf qdisc %q", ErrBadPlan, c.Lane, c.Leaf)
	}
	if errors.Is(err, unix.ENOENT) {
		err = features.Missing("qdisc "+string(c.Leaf), "CONFIG_NET_SCH_"+kconfig(c.Leaf), err)
	}
	if err != nil {
		return fmt.Errorf("add %s leaf for lane %s on %s: %w", c.Leaf, c.Lane, name, hint(err))
	}
	return nil
}

func kconfig(k LeafKind) string {
	switch k {
	case LeafFqCodel:
		return "FQ_CODEL"
	case LeafTbf:
		return "TBF"
	}
	return "FIFO"
}

// hint turns permission errors into a hint at the capability needed.
func hint(err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w (needs CAP_NET_ADMIN)", err)
	}
	return err
}

func (e *Enforcer) rootQdisc(dev netlink.Link) (netlink.Qdisc, error) {
	qs, err := e.h.QdiscList(dev)
	if err != nil {
		return nil, fmt.Errorf("list qdiscs of %s: %w", dev.Attrs().Name, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_ROOT {
			return q, nil
		}
	}
	return nil, nil
}

func (e *Enforcer) rootIsOurs(dev netlink.Link) bool {
	q, err := e.rootQdisc(dev)
	return err == nil && q != nil && q.Attrs().Handle == ClassID(Major, 0) && q.Type() == "htb"
}

// ensureClsact adds a clsact qdisc unless dev has one; it says whether it
// added it.
func (e *Enforcer) ensureClsact(dev netlink.Link) (bool, error) {
	qs, err := e.h.QdiscList(dev)
	if err != nil {
		return false, fmt.Errorf("list qdiscs of %s: %w", dev.Attrs().Name, err)
	}
	for _, q := range qs {
		if q.Type() == "clsact" {
			return false, nil
		}
	}
	e.logf("netsched: tc qdisc add dev %s clsact", dev.Attrs().Name)
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: dev.Attrs().Index, Parent: netlink.HANDLE_CLSACT, Handle: netlink.MakeHandle(0xffff, 0)}}
	if err := e.h.QdiscAdd(q); err != nil {
		return false, fmt.Errorf("add clsact to %s: %w", dev.Attrs().Name, hint(err))
	}
	return true, nil
}

func (e *Enforcer) replaceFilter(dev netlink.Link, parent uint32, prog *ebpf.Program, name string) error {
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: dev.Attrs().Index,
			Parent:    parent,
			Handle:    1,
			Priority:  filterPrio,
			Protocol:  unix.ETH_P_ALL,
		},
		Fd:           prog.FD(),
		Name:         name,
		DirectAction: true,
	}
	e.logf("netsched: tc filter replace dev %s %s prio %d bpf da %s", dev.Attrs().Name, dirName(parent), filterPrio, name)
	if err := e.h.FilterReplace(f); err != nil {
		return fmt.Errorf("attach %s to %s: %w", name, dev.Attrs().Name, hint(err))
	}
	return nil
}

func dirName(parent uint32) string {
	if parent == netlink.HANDLE_MIN_INGRESS {
		return "ingress"
	}
	return "egress"
}

// Remove undoes what Apply did on iface: the tree, the classifiers lanes
// attached, the IFB; and the interface's original root qdisc comes back.
// It also removes a tree left by an earlier run (recognised by its handle).
func (e *Enforcer) Remove(iface string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	dev, err := e.h.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("remove: interface %s: %w", iface, err)
	}
	st := e.ifaces[iface]
	if st == nil {
		st = &ifaceState{ifb: fmt.Sprintf("%s%d", ifbPrefix, dev.Attrs().Index)}
	}
	err = e.teardown(dev, st)
	delete(e.ifaces, iface)
	e.unrecord(iface)
	if e.objs != nil {
		// The classes it alone had lose their flags.
		err = errors.Join(err, e.syncLaneFlags(nil))
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", iface, err)
	}
	return nil
}

// record writes iface's state record with what st knows of the
// interface's original (with a store only; st may be nil).
func (e *Enforcer) record(iface string, rate uint64, st *ifaceState) error {
	if e.opts.store == nil {
		return nil
	}
	r := ifaceRecord{Iface: iface, Rate: rate}
	if st != nil {
		r.Sizes, r.Tree = st.sizes, st.snap
	}
	if err := e.opts.store.Put(state.KindQdisc, iface, r); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	return nil
}

// unrecord deletes iface's state record once lanes has given the
// interface back.
func (e *Enforcer) unrecord(iface string) {
	if e.opts.store == nil {
		return
	}
	if err := e.opts.store.Delete(state.KindQdisc, iface); err != nil {
		e.logf("netsched: %s: delete record: %v", iface, err)
	}
}

// teardown deletes everything lanes put on dev and restores st.orig.
func (e *Enforcer) teardown(dev netlink.Link, st *ifaceState) error {
	var errs []error
	name := dev.Attrs().Name
	if err := e.closeGates(st); err != nil {
		errs = append(errs, err)
	}
	if e.objs != nil {
		if err := e.objs.FollowOfDev.Delete(uint32(dev.Attrs().Index)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("idletime: follow off on %s: %w", name, err))
		}
		if err := e.clearRxWindow(dev); err != nil {
			errs = append(errs, err)
		}
	}
	if err := e.removeIngress(dev, st); err != nil {
		errs = append(errs, err)
	}
	if err := e.deleteFilters(dev, netlink.HANDLE_MIN_EGRESS); err != nil {
		errs = append(errs, err)
	}
	if st.addedClsact {
		if err := e.deleteClsactIfEmpty(dev); err != nil {
			errs = append(errs, err)
		}
	}
	if e.rootIsOurs(dev) {
		e.logf("netsched: tc qdisc del dev %s root handle %x:", name, Major)
		root := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: dev.Attrs().Index, Parent: netlink.HANDLE_ROOT, Handle: ClassID(Major, 0)})
		if err := e.h.QdiscDel(root); err != nil {
			errs = append(errs, fmt.Errorf("delete root qdisc of %s: %w", name, err))
		}
	}
	if err := e.restoreSegments(dev, st); err != nil {
		errs = append(errs, err)
	}
	if st.snap != nil {
		if err := e.restoreTree(dev, st.snap); err != nil {
			errs = append(errs, err)
		}
	} else if st.orig != nil {
		e.logf("netsched: tc qdisc add dev %s root %s (restoring the original)", name, st.orig.Type())
		if err := e.h.QdiscReplace(st.orig); err != nil {
			errs = append(errs, fmt.Errorf("restore root qdisc %s of %s: %w", st.orig.Type(), name, err))
		}
	}
	return errors.Join(errs...)
}

func (e *Enforcer) removeIngress(dev netlink.Link, st *ifaceState) error {
	var errs []error
	if err := e.deleteFilters(dev, netlink.HANDLE_MIN_INGRESS); err != nil {
		errs = append(errs, err)
	}
	if st.ifb != "" {
		if ifb, err := e.h.LinkByName(st.ifb); err == nil {
			e.logf("netsched: ip link del %s", st.ifb)
			if err := e.h.LinkDel(ifb); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", st.ifb, err))
			}
		}
		st.ifb = ""
	}
	return errors.Join(errs...)
}

// deleteFilters deletes lanes' filters (by name prefix) under parent.
func (e *Enforcer) deleteFilters(dev netlink.Link, parent uint32) error {
	fs, err := e.h.FilterList(dev, parent)
	if err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil // no clsact
		}
		return fmt.Errorf("list filters of %s: %w", dev.Attrs().Name, err)
	}
	var errs []error
	for _, f := range fs {
		if u, ok := f.(*netlink.U32); ok && u.Priority == redirPrio && parent == netlink.HANDLE_MIN_INGRESS {
			e.logf("netsched: tc filter del dev %s ingress prio %d u32 (redirect to the ifb)", dev.Attrs().Name, redirPrio)
			if err := e.h.FilterDel(u); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("delete ifb redirect of %s: %w", dev.Attrs().Name, err))
			}
			continue
		}
		bf, ok := f.(*netlink.BpfFilter)
		if !ok || len(bf.Name) < len(filterPrefix) || bf.Name[:len(filterPrefix)] != filterPrefix {
			continue
		}
		e.logf("netsched: tc filter del dev %s %s prio %d (%s)", dev.Attrs().Name, dirName(parent), bf.Priority, bf.Name)
		if err := e.h.FilterDel(bf); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete filter %s of %s: %w", bf.Name, dev.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}

func (e *Enforcer) deleteClsactIfEmpty(dev netlink.Link) error {
	for _, parent := range []uint32{netlink.HANDLE_MIN_EGRESS, netlink.HANDLE_MIN_INGRESS} {
		fs, err := e.h.FilterList(dev, parent)
		if err != nil {
			return nil // no clsact
		}
		if len(fs) > 0 {
			return nil
		}
	}
	e.logf("netsched: tc qdisc del dev %s clsact", dev.Attrs().Name)
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: dev.Attrs().Index, Parent: netlink.HANDLE_CLSACT, Handle: netlink.MakeHandle(0xffff, 0)}}
	if err := e.h.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete clsact of %s: %w", dev.Attrs().Name, err)
	}
	return nil
}

func netnsFromPath(path string) (netns.NsHandle, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return netns.None(), fmt.Errorf("open netns %s: %w", path, err)
	}
	return ns, nil
}

// restorable returns a copy of a listed qdisc that can be sent back to the
// kernel: listing reports some options differently from how they are set.
func restorable(q netlink.Qdisc) netlink.Qdisc {
	switch q := q.(type) {
	case *netlink.Htb:
		c := *q
		c.Version = 3 // dumped as the full HTB_VER, set as its major
		c.DirectPkts = 0
		c.Statistics = nil
		return &c
	}
	return q
}

// Applied returns the plans in place, by interface name, for the daemon's
// records.
func (e *Enforcer) Applied() map[string]Plan {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]Plan, len(e.ifaces))
	for name, st := range e.ifaces {
		p := st.plan
		p.Classes = slices.Clone(p.Classes)
		out[name] = p
	}
	return out
}

// IdletimeErr says why idletime gates are unavailable on this enforcer
// (BPF classification off or missing, no TBF, no ring buffer); nil if
// they are available.
func (e *Enforcer) IdletimeErr() error { return e.idleErr }

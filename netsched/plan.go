package netsched

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lanes-qos/lanes/lane"
)

// Major is the fixed major handle of every qdisc tree lanes builds ("4c4e:").
// A root qdisc with this handle is lanes' own, which is how Cleanup
// recognises the leftovers of a crashed run. A lane's class id is
// Major<<16 | minor, and a socket whose priority equals that id is
// scheduled in that lane (HTB takes skb->priority as a leaf class id).
const Major = 0x4c4e

// leafMajorBase + minor is the major handle of a lane's leaf qdisc;
// tbfMajorBase + minor that of an idletime lane's TBF leaf (a different
// handle, so that turning idletime on or off replaces the leaf: the kernel
// cannot change a qdisc's kind in place).
const (
	leafMajorBase = 0x4d00
	tbfMajorBase  = 0x4e00
)

// Class minors: the root class, the built-in lanes, then user lanes in
// config order.
const (
	rootMinor        = 0x1
	interactiveMinor = 0x10
	normalMinor      = 0x11
	backgroundMinor  = 0x12
	firstUserMinor   = 0x20
	maxMinor         = 0xff
)

// MTU is the packet size (Ethernet frame with header) that FIFO limits
// assume.
const MTU = 1514

// minLeafPackets is the shortest head-drop leaf, in packets. Measured on a
// lone TCP upload (cubic and BBR, offloads on and off) through a 19 Mbit/s
// tree: 2 packets cost up to 9 % of the rate, 4 and 8 nothing; 8 leaves a
// margin.
const minLeafPackets = 8

// superPacket is the largest packet a device hands to its qdiscs when it
// reports no limit of its own: a 64 KiB GSO or GRO aggregate.
const superPacket = 65536

// minRate is the smallest guaranteed rate a class gets, in bits/s.
const minRate = 8000

// Default leaf target delays: interactive lanes and every fq_codel leaf
// get the short one.
const (
	defaultTarget            = 20 * time.Millisecond
	defaultInteractiveTarget = 5 * time.Millisecond
)

// LeafKind is the qdisc at the leaf of each lane class.
type LeafKind string

// Leaf kinds lanes builds.
const (
	// LeafFqCodel is fq_codel with the lane's target delay (preferred).
	LeafFqCodel LeafKind = "fq_codel"
	// LeafHeadDrop is a packet FIFO that drops from its head when full
	// (pfifo_head_drop), holding the lane's target delay at its ceiling
	// in full-size packets, at least minLeafPackets (fallback where
	// fq_codel is missing).
	//
	// It drops the oldest packet, not the arriving one, because of what a
	// drop at the sender's own qdisc does to TCP: a tail drop is returned
	// to the socket as a local drop (NET_XMIT_DROP), the segment stays
	// unsent and the socket waits for an ACK to try again; when nothing
	// else is in flight (a LAN, or a GSO packet larger than a byte FIFO's
	// whole limit) it waits for a retransmission timeout, 200 ms and
	// backing off. BBR, whose first bandwidth samples come out of HTB's
	// burst at the device's speed, paces into such drops again and again:
	// a lone upload got 0.5 % of the rate through an 11,875-byte bfifo.
	// A head drop accepts the new packet and reports congestion
	// (NET_XMIT_CN): the dropped packet was already sent as far as TCP
	// knows, so it is recovered like a loss in the network.
	LeafHeadDrop LeafKind = "pfifo_head_drop"
	// LeafBfifo is a byte FIFO holding the lane's target delay at its
	// ceiling rate. It is the download (IFB) leaf of a plan whose upload
	// leaves are LeafHeadDrop: a download's sender is remote, so a tail
	// drop is an ordinary loss to it, and a byte limit bounds the queue
	// whatever the size of the GRO aggregates that arrive there (a packet
	// limit lets a background download's window grow by a 64 KiB aggregate
	// per slot, and it then crowds the foreground out at the bottleneck
	// before lanes: measured 25 % kept, against 99 % with bytes).
	LeafBfifo LeafKind = "bfifo"
	// LeafTbf is an idletime background lane's leaf: a TBF whose child is
	// a byte FIFO of Limit bytes. Released, the TBF's rate is far above
	// the link's and it never limits; the idletime gates hold the lane by
	// changing its rate to 8 bit/s (see Enforcer.IdleGates). Held, the TBF
	// segments GSO packets into the FIFO (which is why the FIFO is a byte
	// FIFO: TBF's segmentation does not account for a child's head drop),
	// and the FIFO holds at least three of the device's largest packets
	// (see fifoFloor), so that a burst a socket's TCP small queues
	// allowance lets into the qdisc fits in it.
	LeafTbf LeafKind = "tbf"
)

// ClassID returns the tc handle major:minor as one number.
func ClassID(major, minor uint16) uint32 { return uint32(major)<<16 | uint32(minor) }

// Class is one lane's HTB leaf class and its leaf qdisc.
type Class struct {
	Lane    string   `json:"lane"`
	ClassID uint32   `json:"classid"` // Major:minor; also the socket priority of the lane
	Prio    uint32   `json:"prio"`    // HTB priority, 0 (first) .. 7
	Rate    uint64   `json:"rate"`    // guaranteed, bits/s
	Ceil    uint64   `json:"ceil"`    // most it may use, bits/s
	Leaf    LeafKind `json:"leaf"`
	// LeafHandle is the leaf qdisc's handle (major:0).
	LeafHandle uint32 `json:"leaf_handle"`
	// Limit is the leaf queue limit: bytes for tbf, packets for
	// pfifo_head_drop and fq_codel (0: the kernel default).
	Limit  uint32        `json:"limit"`
	Target time.Duration `json:"target_ns"`
	// Idle: an idletime background lane. Its leaf is a TBF that the
	// interface's idletime gates hold during preemption intervals, and its
	// packets are background to the gates; every other packet (other
	// lanes, unclassified) is foreground.
	Idle bool `json:"idle,omitempty"`
	// Mark: the lane's upload packets carry DSCP LE (RFC 8622), so that
	// the receiver (and the network) can treat them as background.
	Mark bool `json:"mark,omitempty"`
	// Quiet: the lane's packets neither start nor extend the idletime
	// gates' preemption intervals (lane's net.preempts = false); they
	// keep the lane's priority only.
	Quiet bool `json:"quiet,omitempty"`
	// Ports are the lane's port rules (net.ports), installed as u32
	// filters only where packets cannot be classified by BPF.
	Ports []lane.PortRule `json:"ports,omitempty"`
	// CC is the congestion control the lane's TCP sockets get (net.cc):
	// "" (the host's default) or lane.CCLedbat.
	CC string `json:"cc,omitempty"`
}

// Plan is the desired tree of one interface. The same tree is built on the
// interface (upload) and, with Ingress, on its IFB (download).
type Plan struct {
	Iface   string  `json:"iface"`
	Rate    uint64  `json:"rate"` // bits/s: the rate of the root class
	Ingress bool    `json:"ingress"`
	Default uint32  `json:"default"` // class id of unclassified packets (the default lane)
	Classes []Class `json:"classes"`
	// Follow is the class a local socket without a lanes label is put in
	// once it receives a packet marked DSCP LE or CS1 (0: off; needs
	// Ingress). Its downloads, and its replies and ACKs, are then
	// scheduled in that class.
	Follow uint32 `json:"follow,omitempty"`
	// RxWindow, with Ingress, bounds each TCP download's receive window to
	// RxWindow x its class's ceiling x the connection's RTT, plus 4
	// segments (config: net.receive_window; 0: off).
	RxWindow float64 `json:"rx_window,omitempty"`
	// ReplaceRoot: replace the interface's root qdisc even when its tree
	// cannot be restored faithfully (config: net.replace_root).
	ReplaceRoot bool `json:"replace_root,omitempty"`
}

// Caps are what the kernel offers the plans of one Enforcer, as it probed
// them (Enforcer.Caps).
type Caps struct {
	// Leaf is the leaf qdisc of every lane class: LeafFqCodel, or
	// LeafHeadDrop where the kernel has no fq_codel.
	Leaf LeafKind
	// Idletime is why the idletime gates cannot be built (nil: they can).
	// Plans then have no idletime part at all: the lanes with
	// net.idletime stay strict lowest-priority classes, unmarked.
	Idletime error
}

// idletimeSpec says which lanes of a plan are idletime background and how
// background travels between hosts: the config's [net.idletime] and the
// lanes' net.idletime and net.preempts (idletimeOf).
type idletimeSpec struct {
	// Lanes are the idletime background lanes (config: the lanes with
	// net.idletime = true), in config order.
	Lanes []string
	// Mark: these lanes' upload packets carry DSCP LE.
	Mark bool
	// Follow: local sockets receiving DSCP LE or CS1 packets follow into
	// the first of Lanes (in plan order). Needs the plan's Ingress.
	Follow bool
	// Quiet are lanes whose packets do not preempt the background
	// (config: net.preempts = false). A name in both Lanes and Quiet is
	// background.
	Quiet []string
	// NoHold: no preemption interval (config pi = "off"). Lanes stay
	// strict lowest-priority classes without gates; Mark and Follow still
	// apply to them, and Quiet is ignored.
	NoHold bool
}

// idletimeOf is the idletime part of cfg's plans: the lanes with
// net.idletime. Without a preemption interval (pi = "off") they get no
// gates but are still marked and followed. Follow needs the download
// direction shaped (that is where marked packets are seen).
func idletimeOf(cfg *lane.Config) idletimeSpec {
	o := idletimeSpec{Mark: cfg.Net.Idle.Mark, Follow: cfg.Net.Idle.Follow && cfg.Net.Ingress, NoHold: cfg.Net.Idle.PI.Off()}
	for _, name := range laneOrder(cfg) {
		switch l := cfg.Lanes[name]; {
		case l.Net.Idletime:
			o.Lanes = append(o.Lanes, name)
		case l.Net.Quiet:
			o.Quiet = append(o.Quiet, name)
		}
	}
	return o
}

// WantsIdletime reports whether cfg's plans have idletime lanes when the
// kernel allows them (Caps.Idletime nil).
func WantsIdletime(cfg *lane.Config) bool {
	return cfg != nil && len(idletimeOf(cfg).Lanes) > 0
}

// Idle reports whether the plan has idletime background lanes.
func (p Plan) Idle() bool {
	for _, c := range p.Classes {
		if c.Idle {
			return true
		}
	}
	return false
}

// withIdletime returns p with the idletime lanes of o: their leaves become
// TBFs over a byte FIFO (holding their target delay at their ceiling; the
// enforcer adds room for the device's largest packets) that the gates can
// hold (not with o.NoHold), and Mark and Follow are set. With no lanes it
// returns p unchanged. p itself is not modified.
func (p Plan) withIdletime(o idletimeSpec) (Plan, error) {
	if len(o.Lanes) == 0 {
		return p, nil
	}
	if o.Follow && !p.Ingress {
		return Plan{}, fmt.Errorf("%w: interface %s: idletime follow needs ingress shaping (net.ingress)", ErrBadPlan, p.Iface)
	}
	p.Classes = slices.Clone(p.Classes)
	for _, name := range o.Lanes {
		i := slices.IndexFunc(p.Classes, func(c Class) bool { return c.Lane == name })
		if i < 0 {
			return Plan{}, fmt.Errorf("%w: interface %s: idletime lane %q has no class", ErrBadPlan, p.Iface, name)
		}
		c := &p.Classes[i]
		if c.ClassID == p.Default {
			return Plan{}, fmt.Errorf("%w: interface %s: idletime lane %q is the default lane: unclassified traffic must stay foreground", ErrBadPlan, p.Iface, name)
		}
		c.Mark = o.Mark
		if o.NoHold {
			continue
		}
		if c.Leaf != LeafTbf {
			// The other leaves' limits are in packets.
			c.Limit = targetBytes(c.Ceil, c.Target)
		}
		c.Leaf = LeafTbf
		c.LeafHandle = ClassID(tbfMajorBase+uint16(c.ClassID&0xffff), 0)
		c.Idle = true
	}
	quiet := o.Quiet
	if o.NoHold {
		quiet = nil // no gates for them to keep quiet
	}
	for _, name := range quiet {
		i := slices.IndexFunc(p.Classes, func(c Class) bool { return c.Lane == name })
		if i < 0 {
			return Plan{}, fmt.Errorf("%w: interface %s: quiet lane %q has no class", ErrBadPlan, p.Iface, name)
		}
		if !p.Classes[i].Idle {
			p.Classes[i].Quiet = true
		}
	}
	if o.Follow {
		for _, c := range p.Classes {
			if slices.Contains(o.Lanes, c.Lane) {
				p.Follow = c.ClassID
				break
			}
		}
	}
	return p, nil
}

// Class returns the class of the named lane.
func (p Plan) Class(laneName string) (Class, bool) {
	for _, c := range p.Classes {
		if c.Lane == laneName {
			return c, true
		}
	}
	return Class{}, false
}

// ErrBadPlan is wrapped by every BuildPlan error.
var ErrBadPlan = errors.New("bad network plan")

// BuildPlan computes the whole tree for iface from cfg — its net section
// and its lanes, idletime included — and the kernel's caps. It is the one
// place where the config's network and idletime settings become a tree;
// it is pure and deterministic.
//
// Idletime (cfg.Net.Idle, the lanes' net.idletime and net.preempts): the
// idletime lanes' leaves are TBFs the gates can hold, unless pi is "off"
// (no gates; their packets are still marked and followed), or caps say
// the kernel cannot build gates (no idletime part at all).
//
// Rates (docs/CONFIG.md, net.rate, net.ceil, net.borrow): a lane's Rate is
// guaranteed as configured; a lane with a rate that may not borrow is
// capped at it (its ceiling is its rate), one that may borrow goes up to
// its Ceil, or the interface rate. A borrowing lane without a rate
// (background) is guaranteed only 1% of the interface rate and is served
// last, so it gets what the others leave idle. The other lanes without a
// rate share what remains equally as their guarantee. A lane without a
// rate has no guarantee of its own to be capped at: its ceiling is its
// Ceil, or the interface rate. HTB lends idle capacity by priority: lower
// Prio borrows first.
func BuildPlan(cfg *lane.Config, iface string, caps Caps) (Plan, error) {
	p, err := buildTree(cfg, iface, caps.Leaf)
	if err != nil {
		return Plan{}, err
	}
	if caps.Idletime != nil {
		return p, nil
	}
	return p.withIdletime(idletimeOf(cfg))
}

// buildTree is BuildPlan without idletime: every lane's class with a leaf
// of kind leaf.
func buildTree(cfg *lane.Config, iface string, leaf LeafKind) (Plan, error) {
	if cfg == nil {
		return Plan{}, fmt.Errorf("%w: no configuration", ErrBadPlan)
	}
	if iface == "" {
		return Plan{}, fmt.Errorf("%w: no interface", ErrBadPlan)
	}
	if leaf != LeafFqCodel && leaf != LeafHeadDrop {
		return Plan{}, fmt.Errorf("%w: unknown leaf qdisc %q", ErrBadPlan, leaf)
	}
	link := cfg.Net.Rate
	if link == 0 {
		return Plan{}, fmt.Errorf("%w: interface %s: net.rate is unset or zero", ErrBadPlan, iface)
	}
	if link < minRate {
		return Plan{}, fmt.Errorf("%w: interface %s: net.rate %s is below the minimum %s", ErrBadPlan, iface, lane.FormatRate(link), lane.FormatRate(minRate))
	}
	names := laneOrder(cfg)
	if len(names) == 0 {
		return Plan{}, fmt.Errorf("%w: no lanes", ErrBadPlan)
	}
	p := Plan{Iface: iface, Rate: link, Ingress: cfg.Net.Ingress, ReplaceRoot: cfg.Net.ReplaceRoot}
	if p.Ingress {
		p.RxWindow = cfg.Net.RxWindow
	}

	minors, err := laneMinors(names)
	if err != nil {
		return Plan{}, err
	}
	floor := max(link/100, minRate)
	var fixed uint64
	var shared []int // indexes of lanes sharing the remainder
	for i, name := range names {
		l := cfg.Lanes[name]
		minor := minors[i]
		n := l.Net
		if n.Priority < 0 || n.Priority > 7 {
			return Plan{}, fmt.Errorf("%w: lane %s: priority %d is outside 0..7", ErrBadPlan, name, n.Priority)
		}
		c := Class{
			Lane:       name,
			ClassID:    ClassID(Major, minor),
			Prio:       uint32(n.Priority),
			Ceil:       link,
			Leaf:       leaf,
			LeafHandle: ClassID(leafMajorBase+minor, 0),
			Target:     n.Target,
			Ports:      slices.Clone(n.Ports),
			CC:         n.CC,
		}
		if n.Ceil != 0 {
			c.Ceil = min(n.Ceil, link)
		}
		switch {
		case n.Rate != 0:
			c.Rate = n.Rate
			fixed += n.Rate
			if !n.Borrow {
				// A lane that may not borrow is capped at its rate.
				if n.Ceil > n.Rate {
					return Plan{}, fmt.Errorf("%w: lane %s: ceil %s above rate %s needs borrow = true", ErrBadPlan, name, lane.FormatRate(n.Ceil), lane.FormatRate(n.Rate))
				}
				c.Ceil = min(n.Rate, link)
			}
		case n.Borrow:
			c.Rate = floor
			fixed += floor
		default:
			shared = append(shared, len(p.Classes))
		}
		if c.Rate > c.Ceil {
			return Plan{}, fmt.Errorf("%w: lane %s: rate %s exceeds its ceiling %s", ErrBadPlan, name, lane.FormatRate(c.Rate), lane.FormatRate(c.Ceil))
		}
		if c.Target == 0 {
			// A FIFO's target is its length: short for interactive, a
			// few packets' worth at the ceiling for the others. CoDel's
			// target is a standing-queue bound: its usual 5 ms everywhere.
			c.Target = defaultTarget
			if name == lane.Interactive || leaf == LeafFqCodel {
				c.Target = defaultInteractiveTarget
			}
		}
		if leaf == LeafHeadDrop {
			c.Limit = max(minLeafPackets, (targetBytes(c.Ceil, c.Target)+MTU-1)/MTU)
		}
		p.Classes = append(p.Classes, c)
		if name == cfg.Default {
			p.Default = c.ClassID
		}
	}
	if fixed > link {
		return Plan{}, fmt.Errorf("%w: interface %s: the lanes' guaranteed rates sum to %s, more than net.rate %s", ErrBadPlan, iface, lane.FormatRate(fixed), lane.FormatRate(link))
	}
	if len(shared) > 0 {
		each := max((link-fixed)/uint64(len(shared)), minRate)
		for _, i := range shared {
			p.Classes[i].Rate = min(each, p.Classes[i].Ceil)
		}
	}
	if p.Default == 0 {
		return Plan{}, fmt.Errorf("%w: default lane %q has no class", ErrBadPlan, cfg.Default)
	}
	if err := checkPorts(p); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// withCeil is c with ceil as its ceiling (a controller's, at run time) and
// a FIFO leaf's limit sized for it as the plan sizes it for the configured
// one: the lane's target at that ceiling, so that lowering the ceiling
// does not leave a queue many targets long. fq_codel's target is a time
// and a TBF leaf belongs to the idletime gates: both are kept.
func (c Class) withCeil(ceil uint64) Class {
	c.Ceil = ceil
	switch c.Leaf {
	case LeafHeadDrop:
		c.Limit = max(minLeafPackets, (targetBytes(ceil, c.Target)+MTU-1)/MTU)
	case LeafBfifo:
		c.Limit = targetBytes(ceil, c.Target)
	}
	return c
}

// download returns the class as built on the IFB: a head-drop leaf
// becomes a byte FIFO of the lane's target (see LeafBfifo).
func (c Class) download() Class {
	if c.Leaf == LeafHeadDrop {
		c.Leaf = LeafBfifo
		c.Limit = targetBytes(c.Ceil, c.Target)
	}
	return c
}

// targetBytes is what a queue drained at rate (bits/s) holds in target,
// at least two full packets.
func targetBytes(rate uint64, target time.Duration) uint32 {
	return uint32(max(2*MTU, rate/8*uint64(target)/uint64(time.Second)))
}

// laneMinors numbers lanes (in laneOrder) as every plan does: the
// built-in lanes have fixed minors, the others follow in order. A lane's
// class id, and so its sockets' label, does not depend on the interface
// or on whether anything is shaped.
func laneMinors(names []string) ([]uint16, error) {
	minors := make([]uint16, len(names))
	next := uint16(firstUserMinor)
	for i, name := range names {
		switch name {
		case lane.Interactive:
			minors[i] = interactiveMinor
		case lane.Normal:
			minors[i] = normalMinor
		case lane.Background:
			minors[i] = backgroundMinor
		default:
			if next > maxMinor {
				return nil, fmt.Errorf("%w: more than %d lanes", ErrBadPlan, maxMinor-firstUserMinor+4)
			}
			minors[i], next = next, next+1
		}
	}
	return minors, nil
}

// SocketPlan is what lanes does to the sockets of each lane, shaped or
// not: a lane's class id labels its sockets (their priority, as in every
// Plan), and a class's CC and Mark act on the socket itself: its TCP
// connections get the congestion control, its TCP and UDP sockets DSCP
// LE. With no [net] rate it is all of lanes' network enforcement (nothing
// is shaped); with a rate the interfaces' Plans add the trees. Only Lane,
// ClassID, CC and Mark of its classes are set.
type SocketPlan struct {
	Classes []Class `json:"classes"`
	// LedbatTarget is TARGET of the lanes with CC lane.CCLedbat, senders
	// and receivers ([net.ledbat] target; 0: the programs' own 60 ms).
	LedbatTarget time.Duration `json:"ledbat_target,omitempty"`
}

// BuildSocketPlan returns cfg's socket plan. A lane is marked when it is
// an idletime lane and [net.idletime] mark is on, whatever the
// preemption interval: marking needs no gate.
func BuildSocketPlan(cfg *lane.Config) (SocketPlan, error) {
	if cfg == nil {
		return SocketPlan{}, fmt.Errorf("%w: no configuration", ErrBadPlan)
	}
	names := laneOrder(cfg)
	minors, err := laneMinors(names)
	if err != nil {
		return SocketPlan{}, err
	}
	sp := SocketPlan{LedbatTarget: cfg.Net.LedbatTarget}
	for i, name := range names {
		n := cfg.Lanes[name].Net
		sp.Classes = append(sp.Classes, Class{
			Lane:    name,
			ClassID: ClassID(Major, minors[i]),
			CC:      n.CC,
			Mark:    n.Idletime && cfg.Net.Idle.Mark,
		})
	}
	return sp, nil
}

// Acts reports whether the plan does anything to some lane's sockets.
func (sp SocketPlan) Acts() bool {
	for _, c := range sp.Classes {
		if c.CC != "" || c.Mark {
			return true
		}
	}
	return false
}

// Class returns the class of the named lane.
func (sp SocketPlan) Class(laneName string) (Class, bool) {
	for _, c := range sp.Classes {
		if c.Lane == laneName {
			return c, true
		}
	}
	return Class{}, false
}

// laneOrder returns the lanes in cfg.Order, then any others sorted by name.
func laneOrder(cfg *lane.Config) []string {
	var names []string
	seen := map[string]bool{}
	for _, n := range cfg.Order {
		if cfg.Lanes[n] != nil && !seen[n] {
			names = append(names, n)
			seen[n] = true
		}
	}
	var rest []string
	for n := range cfg.Lanes {
		if !seen[n] && cfg.Lanes[n] != nil {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}

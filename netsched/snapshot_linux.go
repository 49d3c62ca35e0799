package netsched

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/netprobe"
)

// The snapshot of a root qdisc tree is taken over rtnetlink, as tc(8)
// sees it: RTM_GETQDISC, RTM_GETTCLASS and RTM_GETTFILTER (per qdisc and
// class) for the device. Only the qdiscs under the root count (an ingress
// or clsact qdisc is not replaced by lanes). A snapshot is restorable when
// replaying it on a scratch device in a throwaway network namespace and
// dumping that device gives the same objects: then it is known to come
// back as found.

const (
	tcHIngress = 0xfffffff1 // parent of ingress and clsact qdiscs

	tcaHtbInit  = 2  // TCA_HTB_INIT: struct tc_htb_glob
	tcaU32Pcnt  = 9  // TCA_U32_PCNT: per-key hit counters
	tcaU32Flags = 11 // TCA_U32_FLAGS: skip_hw, skip_sw; in_hw, not_in_hw are state
	u32HtidAuto = 0x800
)

// rawAttrs is a pre-serialised run of netlink attributes.
type rawAttrs []byte

func (r rawAttrs) Len() int          { return len(r) }
func (r rawAttrs) Serialize() []byte { return r }

func putAttr(b []byte, typ uint16, data []byte) []byte {
	var h [4]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(4+len(data)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(b, h[:]...)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// sanitizeOptions drops what a dump reports but a create request does not
// take (counters), and turns what a dump reports differently from how it
// is set into the settable form.
func sanitizeOptions(typ, kind string, opts []byte) []byte {
	attrs, err := nl.ParseRouteAttr(opts)
	if err != nil {
		return opts // not nested (e.g. a FIFO's struct): kept as is
	}
	var out []byte
	for _, a := range attrs {
		data := a.Value
		switch {
		case typ == "qdisc" && kind == "htb" && a.Attr.Type&nlaTypeMask == tcaHtbInit && len(data) >= 20:
			data = slices.Clone(data)
			binary.NativeEndian.PutUint32(data[0:], 3)  // dumped as HTB_VER, set as its major
			binary.NativeEndian.PutUint32(data[16:], 0) // direct_pkts: a counter
		case typ == "filter" && kind == "u32" && a.Attr.Type&nlaTypeMask == tcaU32Pcnt:
			continue
		case typ == "filter" && kind == "u32" && a.Attr.Type&nlaTypeMask == tcaU32Flags && len(data) == 4:
			data = binary.NativeEndian.AppendUint32(nil, binary.NativeEndian.Uint32(data)&(nl.TCA_CLS_FLAGS_SKIP_HW|nl.TCA_CLS_FLAGS_SKIP_SW))
		}
		out = putAttr(out, a.Attr.Type, data)
	}
	return out
}

const nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)

// parseTC turns a dumped RTM_NEW{QDISC,TCLASS,TFILTER} message into a
// TCObject, and the index of its device.
func parseTC(typ string, msg []byte) (TCObject, int32, error) {
	if len(msg) < nl.SizeofTcMsg {
		return TCObject{}, 0, fmt.Errorf("short %s message", typ)
	}
	tm := nl.DeserializeTcMsg(msg)
	o := TCObject{Type: typ, Parent: tm.Parent, Handle: tm.Handle}
	if typ != "qdisc" {
		o.Info = tm.Info // a qdisc's is its reference count
	}
	attrs, err := nl.ParseRouteAttr(msg[nl.SizeofTcMsg:])
	if err != nil {
		return TCObject{}, 0, fmt.Errorf("parse %s message: %w", typ, err)
	}
	var kept []syscall.NetlinkRouteAttr
	for _, a := range attrs {
		switch a.Attr.Type & nlaTypeMask {
		case unix.TCA_KIND:
			o.Kind = strings.TrimRight(string(a.Value), "\x00")
		case unix.TCA_OPTIONS, unix.TCA_STAB, unix.TCA_CHAIN:
			kept = append(kept, a)
		}
	}
	for _, a := range kept {
		data := a.Value
		if a.Attr.Type&nlaTypeMask == unix.TCA_OPTIONS {
			data = sanitizeOptions(typ, o.Kind, data)
		}
		o.Attrs = putAttr(o.Attrs, a.Attr.Type, data)
	}
	return o, tm.Ifindex, nil
}

// request returns a netlink request sent in e's namespace, and what closes
// its socket.
func (e *Enforcer) request(proto, flags int) (*nl.NetlinkRequest, func(), error) {
	req := nl.NewNetlinkRequest(proto, flags)
	if !e.ns.IsOpen() {
		return req, func() {}, nil
	}
	s, err := nl.GetNetlinkSocketAt(e.ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, nil, fmt.Errorf("netlink socket in netns: %w", err)
	}
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: s}}
	return req, s.Close, nil
}

// tcMsgTypes are the dump request and the reply message of each object
// type.
var tcMsgTypes = map[string][2]int{
	"qdisc":  {unix.RTM_GETQDISC, unix.RTM_NEWQDISC},
	"class":  {unix.RTM_GETTCLASS, unix.RTM_NEWTCLASS},
	"filter": {unix.RTM_GETTFILTER, unix.RTM_NEWTFILTER},
}

// dumpTC dumps one kind of tc object of device index under parent (0: all).
func (e *Enforcer) dumpTC(typ string, index int, parent uint32) ([]TCObject, error) {
	get, res := tcMsgTypes[typ][0], tcMsgTypes[typ][1]
	req, done, err := e.request(get, unix.NLM_F_DUMP)
	if err != nil {
		return nil, err
	}
	defer done()
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(index), Parent: parent})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, uint16(res))
	if err != nil {
		return nil, fmt.Errorf("dump %ss: %w", typ, err)
	}
	var out []TCObject
	for _, m := range msgs {
		o, idx, err := parseTC(typ, m)
		if err != nil {
			return nil, err
		}
		if int(idx) == index {
			out = append(out, o)
		}
	}
	return out, nil
}

// dumpTree returns the objects of dev's root tree: qdiscs (root first),
// their classes, and the filters attached to each, in replay order.
func (e *Enforcer) dumpTree(index int) ([]TCObject, error) {
	qs, err := e.dumpTC("qdisc", index, 0)
	if err != nil {
		return nil, err
	}
	var qdiscs []TCObject
	majors := map[uint32]bool{}
	for _, q := range qs {
		if q.Parent == tcHIngress || q.Handle == 0 {
			continue // ingress or clsact; a default qdisc the kernel makes again
		}
		qdiscs = append(qdiscs, q)
		majors[q.Handle>>16] = true
	}
	cs, err := e.dumpTC("class", index, 0)
	if err != nil {
		return nil, err
	}
	var classes []TCObject
	for _, c := range cs {
		if majors[c.Handle>>16] {
			classes = append(classes, c)
		}
	}
	tree := order(qdiscs, classes)
	var filters []TCObject
	for _, o := range tree {
		fs, err := e.dumpTC("filter", index, o.Handle)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			if f.Parent != o.Handle {
				continue
			}
			filters = append(filters, f)
		}
	}
	return append(tree, filters...), nil
}

// order puts qdiscs and classes in an order they can be created in: an
// object after the qdisc or class it hangs from (the dump order among
// siblings is kept). Objects whose parent is missing go last.
func order(qdiscs, classes []TCObject) []TCObject {
	rest := append(slices.Clone(qdiscs), classes...)
	have := map[uint32]bool{}
	var out []TCObject
	for len(rest) > 0 {
		var next []TCObject
		for _, o := range rest {
			ok := o.Type == "qdisc" && o.Parent == netlink.HANDLE_ROOT || have[createParent(o)]
			if ok {
				out = append(out, o)
				have[o.Handle] = true
			} else {
				next = append(next, o)
			}
		}
		if len(next) == len(rest) {
			return append(out, next...)
		}
		rest = next
	}
	return out
}

// snapshotTree takes dev's root tree. It returns nil when the root is the
// kernel's default (deleting lanes' root brings that back).
func (e *Enforcer) snapshotTree(dev netlink.Link) (*TreeSnapshot, error) {
	objs, err := e.dumpTree(dev.Attrs().Index)
	if err != nil {
		return nil, fmt.Errorf("snapshot the root qdisc tree of %s: %w", dev.Attrs().Name, err)
	}
	if len(objs) == 0 || objs[0].Type != "qdisc" || objs[0].Parent != netlink.HANDLE_ROOT {
		return nil, nil
	}
	return &TreeSnapshot{Objects: objs}, nil
}

// replay creates snap's objects on device index, in order. A u32 hash
// table the kernel makes by itself (the root one of each priority) is not
// sent. A class that already exists and cannot be changed (those of mq or
// prio, made with their qdisc) is left to the final comparison.
func (e *Enforcer) replay(index int, snap *TreeSnapshot) error {
	for _, o := range snap.Objects {
		if o.Type == "filter" && (!hasOptions(o) || o.Kind == "u32" && o.Handle&0xfffff == 0 && o.Handle>>20 >= u32HtidAuto) {
			continue // a filter chain's header, or u32's own root hash table
		}
		proto, flags := unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE
		info := uint32(0)
		switch o.Type {
		case "class":
			proto, flags = unix.RTM_NEWTCLASS, unix.NLM_F_CREATE
		case "filter":
			proto, flags, info = unix.RTM_NEWTFILTER, unix.NLM_F_CREATE, o.Info
		}
		req, done, err := e.request(proto, flags|unix.NLM_F_ACK)
		if err != nil {
			return err
		}
		req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(index), Handle: o.Handle, Parent: createParent(o), Info: info})
		req.AddData(nl.NewRtAttr(unix.TCA_KIND, nl.ZeroTerminated(o.Kind)))
		if len(o.Attrs) > 0 {
			req.AddData(rawAttrs(o.Attrs))
		}
		_, err = req.Execute(unix.NETLINK_ROUTE, 0)
		done()
		if err != nil && !(o.Type == "class" && errors.Is(err, unix.EOPNOTSUPP)) {
			return fmt.Errorf("create %s %s %x:%x (parent %x:%x): %w", o.Type, o.Kind, o.Handle>>16, o.Handle&0xffff, o.Parent>>16, o.Parent&0xffff, err)
		}
	}
	return nil
}

// createParent is the parent to create o under: a top class of its qdisc
// is dumped with parent "root" (it hangs from the qdisc, root or not).
func createParent(o TCObject) uint32 {
	if o.Type == "class" && o.Parent == netlink.HANDLE_ROOT {
		return o.Handle &^ 0xffff
	}
	return o.Parent
}

func hasOptions(o TCObject) bool {
	attrs, err := nl.ParseRouteAttr(o.Attrs)
	if err != nil {
		return false
	}
	for _, a := range attrs {
		if a.Attr.Type&nlaTypeMask == unix.TCA_OPTIONS {
			return true
		}
	}
	return false
}

// sameTree says how got differs from want ("" if it does not).
func sameTree(want, got []TCObject) string {
	ws, gs := make([]string, len(want)), make([]string, len(got))
	for i, o := range want {
		ws[i] = o.String()
	}
	for i, o := range got {
		gs[i] = o.String()
	}
	slices.Sort(ws)
	slices.Sort(gs)
	var diff []string
	for _, w := range ws {
		if i, ok := slices.BinarySearch(gs, w); ok {
			gs = slices.Delete(gs, i, i+1)
		} else {
			diff = append(diff, "missing: "+w)
		}
	}
	for _, g := range gs {
		diff = append(diff, "extra: "+g)
	}
	return strings.Join(diff, "; ")
}

// proveRestorable replays snap on a scratch device like dev (same number
// of transmit queues, MTU and queue length) in a throwaway network
// namespace and compares what the kernel then dumps with snap.
func proveRestorable(dev netlink.Link, snap *TreeSnapshot) error {
	return inScratchNetns(func(s *Enforcer) error {
		a := dev.Attrs()
		la := netlink.LinkAttrs{Name: "lanes-snap0", MTU: a.MTU, TxQLen: a.TxQLen, NumTxQueues: max(a.NumTxQueues, 1)}
		var scratch netlink.Link = &netlink.Dummy{LinkAttrs: la}
		if err := s.h.LinkAdd(scratch); err != nil {
			scratch = &netlink.Veth{LinkAttrs: la, PeerName: "lanes-snap1"}
			if err := s.h.LinkAdd(scratch); err != nil {
				return fmt.Errorf("scratch device: %w", err)
			}
		}
		l, err := s.h.LinkByName(la.Name)
		if err != nil {
			return fmt.Errorf("scratch device: %w", err)
		}
		if err := s.h.LinkSetUp(l); err != nil {
			return fmt.Errorf("scratch device up: %w", err)
		}
		if err := s.replay(l.Attrs().Index, snap); err != nil {
			return fmt.Errorf("replaying it on a scratch device: %w", err)
		}
		got, err := s.dumpTree(l.Attrs().Index)
		if err != nil {
			return err
		}
		if d := sameTree(snap.Objects, got); d != "" {
			return fmt.Errorf("replayed on a scratch device it differs: %s", d)
		}
		return nil
	})
}

// inScratchNetns runs fn with an Enforcer (netlink handle and namespace
// only) in a new network namespace that is destroyed afterwards; the
// calling thread never enters it.
func inScratchNetns(fn func(*Enforcer) error) error {
	return netprobe.InThrowawayNetns(func(h *netlink.Handle, ns netns.NsHandle) error {
		return fn(&Enforcer{h: h, ns: ns, logf: func(string, ...any) {}})
	})
}

// restoreTree gives dev snap back once lanes' root is gone.
func (e *Enforcer) restoreTree(dev netlink.Link, snap *TreeSnapshot) error {
	e.logf("netsched: restoring the original root qdisc tree of %s (%d objects, root %s)", dev.Attrs().Name, len(snap.Objects), snap.Objects[0].Kind)
	if err := e.replay(dev.Attrs().Index, snap); err != nil {
		return fmt.Errorf("restore the root qdisc tree of %s: %w", dev.Attrs().Name, err)
	}
	return nil
}

// RestoreTree gives iface the tree of snap back, as the start after a
// crash does with the snapshot in the interface's state record, after
// Cleanup removed lanes' tree. A root that is neither the kernel's default
// nor lanes' was set since: it is left alone.
func RestoreTree(logf func(string, ...any), iface string, snap *TreeSnapshot, opts ...Option) error {
	if snap == nil || len(snap.Objects) == 0 {
		return nil
	}
	e, done, err := handleOnly(logf, opts)
	if err != nil {
		return fmt.Errorf("restore tree: %w", err)
	}
	defer done()
	logf = e.logf
	dev, err := e.h.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("restore tree: interface %s: %w", iface, err)
	}
	root, err := e.rootQdisc(dev)
	if err != nil {
		return fmt.Errorf("restore tree: %w", err)
	}
	if root != nil && root.Attrs().Handle != 0 {
		if root.Attrs().Handle>>16 == Major {
			return fmt.Errorf("restore tree: lanes' tree is still on %s", iface)
		}
		logf("netsched: %s has root qdisc %s %x: set since lanes replaced it: not restoring the recorded one", iface, root.Type(), root.Attrs().Handle>>16)
		return nil
	}
	return e.restoreTree(dev, snap)
}

// OriginalTree returns the root tree iface had before lanes replaced it
// (also in its state record); false when lanes shapes it over the
// kernel's default root (or does not shape it).
func (e *Enforcer) OriginalTree(iface string) (*TreeSnapshot, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.ifaces[iface]
	if st == nil || st.snap == nil {
		return nil, false
	}
	return st.snap, true
}

// takeOriginal snapshots dev's root tree for st before lanes replaces it
// and proves it restorable. A tree that is not is refused with
// ErrRootNotRestorable unless p.ReplaceRoot.
func (e *Enforcer) takeOriginal(dev netlink.Link, st *ifaceState, p Plan) error {
	root, err := e.rootQdisc(dev)
	if err != nil {
		return err
	}
	if root == nil || root.Attrs().Handle == 0 || root.Attrs().Handle>>16 == Major {
		return nil // the kernel's default, or lanes' own left by a crash
	}
	st.orig = restorable(root)
	snap, err := e.snapshotTree(dev)
	if err == nil && snap != nil {
		err = proveRestorable(dev, snap)
	}
	if snap != nil {
		st.snap = snap
	}
	if err == nil {
		e.logf("netsched: %s: root %s %x: snapshotted (%d objects), restore proven on a scratch device", p.Iface, root.Type(), root.Attrs().Handle>>16, len(snap.Objects))
		return nil
	}
	if !p.ReplaceRoot {
		return fmt.Errorf("%w (%s): %v; %s is left unshaped (set [net] replace_root = true to shape it anyway: the tree is then restored only as far as possible)",
			ErrRootNotRestorable, root.Type(), err, p.Iface)
	}
	e.logf("netsched: %s: %v; replacing the root anyway (net.replace_root), the stop restores it as far as possible", p.Iface, err)
	st.lossy = err
	return nil
}

// rootMechanisms are `lanes doctor` lines for the interfaces whose root
// tree lanes keeps because it cannot restore it, and for those it replaced
// anyway.
func (e *Enforcer) rootMechanisms() []features.Mechanism {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ms []features.Mechanism
	for _, iface := range slices.Sorted(maps.Keys(e.refused)) {
		ms = append(ms, features.Mechanism{Resource: "net root qdisc " + iface,
			Backend: "kept: " + iface + " is not shaped", Reason: e.refused[iface].Error()})
	}
	for _, iface := range slices.Sorted(maps.Keys(e.ifaces)) {
		if st := e.ifaces[iface]; st.lossy != nil {
			ms = append(ms, features.Mechanism{Resource: "net root qdisc " + iface, OK: true,
				Backend: "replaced (net.replace_root): restored on stop only as far as possible", Reason: st.lossy.Error()})
		}
	}
	return ms
}

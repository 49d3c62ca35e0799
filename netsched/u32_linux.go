package netsched

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/netprobe"
	"github.com/lanes-qos/lanes/lane"
)

// Port rules: where BPF cannot classify packets, lanes' net.ports become
// tc u32 filters on the HTB root (parent Major:) of the interface and of
// its IFB, all at one tc priority, protocol all:
//
//	root table (the priority's own)
//	  IPv4, not a later fragment: offset by the header length (IHL*4),
//	                              link to table portHT4
//	  IPv6:                       offset 40, link to table portHT6
//	table portHT4 / portHT6 (divisor 1), one node per protocol, port
//	block and end: transport protocol (IPv4 protocol byte, IPv6 next
//	header) and the port at nexthdr+0 (source: high half, destination: low
//	half) -> flowid the lane's class
//
// Nodes are tried in handle order: first the local end (source port on
// egress, destination port on the IFB), then the remote end, lanes in plan
// order within each. An unmatched packet falls through to HTB's default
// class. IPv6 extension headers are not walked: such packets stay in the
// default lane.
const (
	portPrio = filterPrio + 2 // tc priority of the port-rule filters
	portHT4  = 0x4c5          // u32 table id of the IPv4 port nodes
	portHT6  = 0x4c6          // u32 table id of the IPv6 port nodes
)

// portState says where port rules classify, and why BPF does not.
type portState struct {
	egress  bool  // uploads: no BPF egress classifier
	ingress bool  // downloads: u32 on the IFB instead of bpf_sk_lookup
	ingWhy  error // why the BPF ingress classifier is not used
}

// initPortRules decides, after New's probes, where port rules stand in for
// BPF: on egress when the BPF programs are not loaded, on ingress when the
// BPF ingress classifier is unavailable but an IFB with a u32 redirect
// works.
func (e *Enforcer) initPortRules() {
	e.ports.egress = e.objs == nil
	if e.ingErr == nil {
		return
	}
	if err := netprobe.HaveIngressPorts(); err != nil {
		e.ingErr = err
		return
	}
	e.ports.ingress, e.ports.ingWhy, e.ingErr = true, e.ingErr, nil
}

// syncPortFilters makes the port-rule filters on dev's root match p: it
// deletes the ones there, then, with enabled, installs p's. dir is Egress
// (dev is the interface: the source port is local) or Ingress (dev is the
// IFB: the destination port is local).
func (e *Enforcer) syncPortFilters(dev netlink.Link, p Plan, dir string, enabled bool) error {
	name := dev.Attrs().Name
	parent := ClassID(Major, 0)
	fs, err := e.h.FilterList(dev, parent)
	if err != nil {
		return fmt.Errorf("list filters of %s: %w", name, err)
	}
	for _, f := range fs {
		if f.Attrs().Priority != portPrio {
			continue
		}
		// Without a handle the whole priority goes: every table and node.
		e.logf("netsched: tc filter del dev %s parent %x: prio %d (port rules)", name, Major, portPrio)
		del := &netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: dev.Attrs().Index, Parent: parent, Priority: portPrio, Protocol: unix.ETH_P_ALL}}
		if err := e.h.FilterDel(del); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete port rules of %s: %w", name, err)
		}
		break
	}
	if !enabled {
		return nil
	}
	filters, summary, err := portFilters(dev.Attrs().Index, p, dir)
	if err != nil || len(filters) == 0 {
		return err
	}
	e.logf("netsched: tc filter add dev %s parent %x: prio %d u32: %d filters for %s", name, Major, portPrio, len(filters), summary)
	for _, f := range filters {
		if err := e.h.FilterAdd(f); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
				err = features.Missing("tc u32 classifier", "CONFIG_NET_CLS_U32", err)
			}
			return fmt.Errorf("add port rule filter %x on %s: %w", f.Handle, name, hint(err))
		}
	}
	return nil
}

// dropBPFFilter deletes a lanes BPF classifier under parent (clsact egress
// or ingress) of dev, left by an earlier run that could use BPF: with port
// rules in charge it must not classify too.
func (e *Enforcer) dropBPFFilter(dev netlink.Link, parent uint32) error {
	fs, err := e.h.FilterList(dev, parent)
	if err != nil {
		return nil // no clsact
	}
	for _, f := range fs {
		bf, ok := f.(*netlink.BpfFilter)
		if !ok || !strings.HasPrefix(bf.Name, filterPrefix) {
			continue
		}
		e.logf("netsched: tc filter del dev %s %s prio %d (%s: port rules classify instead)", dev.Attrs().Name, dirName(parent), bf.Priority, bf.Name)
		if err := e.h.FilterDel(bf); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete filter %s of %s: %w", bf.Name, dev.Attrs().Name, err)
		}
	}
	return nil
}

// portFilters builds the u32 filters of p's port rules on the device with
// index idx, in the order they must be added (tables, their nodes, then
// the links to them), and a summary for the log. No rules: no filters.
func portFilters(idx int, p Plan, dir string) ([]*netlink.U32, string, error) {
	if err := checkPorts(p); err != nil {
		return nil, "", err
	}
	attrs := netlink.FilterAttrs{LinkIndex: idx, Parent: ClassID(Major, 0), Priority: portPrio, Protocol: unix.ETH_P_ALL}
	ends := []bool{true, false} // source port first on egress
	if dir == Ingress {
		ends = []bool{false, true}
	}
	type family struct {
		ht    uint32
		proto func(uint8) netlink.TcU32Key
		nodes []*netlink.U32
	}
	fams := []*family{
		// IPv4: the protocol byte, 9; later fragments never reach the
		// table (the link checks the fragment offset).
		{ht: portHT4, proto: func(p uint8) netlink.TcU32Key { return u32Key(0x00ff0000, uint32(p)<<16, 8, false) }},
		// IPv6: the next header byte, 6.
		{ht: portHT6, proto: func(p uint8) netlink.TcU32Key { return u32Key(0x0000ff00, uint32(p)<<8, 4, false) }},
	}
	var summary []string
	for _, src := range ends {
		for _, c := range p.Classes {
			for _, r := range c.Ports {
				if src {
					summary = append(summary, fmt.Sprintf("%s->%x:%x", r, c.ClassID>>16, c.ClassID&0xffff))
				}
				for _, proto := range r.Protos() {
					for _, b := range portBlocks(r.Lo, r.Hi) {
						port := u32Key(uint32(b.Mask), uint32(b.Val), 0, true)
						if src {
							port.Mask, port.Val = port.Mask<<16, port.Val<<16
						}
						for _, f := range fams {
							handle := f.ht<<20 | uint32(len(f.nodes)+1)
							a := attrs
							a.Handle = handle
							f.nodes = append(f.nodes, &netlink.U32{
								FilterAttrs: a,
								ClassId:     c.ClassID,
								Hash:        f.ht << 20,
								Sel: &netlink.TcU32Sel{
									Flags: netlink.TC_U32_TERMINAL,
									Keys:  []netlink.TcU32Key{f.proto(ipProto(proto)), port},
								},
							})
						}
					}
				}
			}
		}
	}
	if len(fams[0].nodes) == 0 {
		return nil, "", nil
	}
	var out []*netlink.U32
	for _, f := range fams {
		a := attrs
		a.Handle = f.ht << 20
		out = append(out, &netlink.U32{FilterAttrs: a, Divisor: 1})
	}
	for _, f := range fams {
		out = append(out, f.nodes...)
	}
	out = append(out,
		// IPv4 (version 4), fragment offset 0: the transport header is at
		// IHL*4: offset at 0 mask 0x0f00 shift 6.
		&netlink.U32{
			FilterAttrs: attrs,
			Link:        portHT4 << 20,
			Sel: &netlink.TcU32Sel{
				Flags:    netlink.TC_U32_VAROFFSET,
				Offmask:  0x0f00,
				Offshift: 6,
				Keys: []netlink.TcU32Key{
					u32Key(0xf0000000, 0x40000000, 0, false),
					u32Key(0x00001fff, 0, 4, false),
				},
			},
		},
		// IPv6 (version 6): the transport header is at 40.
		&netlink.U32{
			FilterAttrs: attrs,
			Link:        portHT6 << 20,
			Sel: &netlink.TcU32Sel{
				Flags: netlink.TC_U32_OFFSET,
				Off:   40,
				Keys:  []netlink.TcU32Key{u32Key(0xf0000000, 0x60000000, 0, false)},
			},
		},
	)
	return out, strings.Join(summary, ", "), nil
}

// u32Key matches the 32 bits at off (host order here; the netlink library
// sends them in network order), or at nexthdr+off.
func u32Key(mask, val uint32, off int32, nexthdr bool) netlink.TcU32Key {
	k := netlink.TcU32Key{Mask: mask, Val: val & mask, Off: off}
	if nexthdr {
		k.OffMask = -1
	}
	return k
}

// ipProto is the IP protocol number of a port rule's protocol.
func ipProto(p string) uint8 {
	if p == lane.ProtoUDP {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

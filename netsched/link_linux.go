package netsched

import (
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/lanes-qos/lanes/internal/netnsrun"
	"github.com/lanes-qos/lanes/internal/netprobe"
)

// readLinkFacts reads dev's facts in network namespace ns (none: the
// caller's). rate is lanes' shaped rate (0: not shaped) and ingress whether
// downloads are shaped; they decide the warnings.
func readLinkFacts(ns netns.NsHandle, dev netlink.Link, rate uint64, ingress bool, orig *SegmentSizes) LinkFacts {
	f := LinkFacts{Iface: dev.Attrs().Name, Sizes: sizesOf(dev), Orig: orig, Bounded: orig != nil, Rate: rate}
	var l netprobe.Link
	err := netnsrun.In(ns, func() error {
		l = netprobe.ReadLink(dev)
		return nil
	})
	f.TSO, f.GSO, f.GRO, f.LRO, f.CongestionControl = l.TSO, l.GSO, l.GRO, l.LRO, l.CongestionControl
	var errs []string
	if l.Err != "" {
		errs = append(errs, l.Err)
	}
	if err != nil {
		errs = append(errs, err.Error())
	}
	f.Err = strings.Join(errs, "; ")
	f.Warnings = f.warnings(dev.Attrs().MTU, rate, ingress)
	return f
}

// Links returns the facts of every interface lanes shapes.
func (e *Enforcer) Links() []LinkFacts {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []LinkFacts
	for name, st := range e.ifaces {
		dev, err := e.h.LinkByName(name)
		if err != nil {
			out = append(out, LinkFacts{Iface: name, Err: err.Error()})
			continue
		}
		f := readLinkFacts(e.ns, dev, st.plan.Rate, st.plan.Ingress, st.sizes)
		if st.sizeErr != nil {
			f.Warnings = append(f.Warnings, "lanes could not bound the segment sizes: "+st.sizeErr.Error())
		}
		if st.plan.Ingress && e.rxErr == nil && !e.ports.ingress {
			f.RxWindow = st.plan.RxWindow
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b LinkFacts) int { return strings.Compare(a.Iface, b.Iface) })
	return out
}

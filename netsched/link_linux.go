package netsched

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// offloadNames are the ethtool features LinkFacts reads.
const (
	featTSO = "tx-tcp-segmentation"
	featGSO = "tx-generic-segmentation"
	featGRO = "rx-gro"
	featLRO = "rx-lro"
)

// readLinkFacts reads dev's facts in network namespace ns (none: the
// caller's). rate is lanes' shaped rate (0: not shaped) and ingress whether
// downloads are shaped; they decide the warnings.
func readLinkFacts(ns netns.NsHandle, dev netlink.Link, rate uint64, ingress bool, orig *SegmentSizes) LinkFacts {
	f := LinkFacts{Iface: dev.Attrs().Name, Sizes: sizesOf(dev), Orig: orig, Bounded: orig != nil, Rate: rate}
	var errs []string
	err := runInNetns(ns, func() error {
		feats, err := offloads(f.Iface)
		if err != nil {
			errs = append(errs, err.Error())
		} else {
			f.TSO, f.GSO, f.GRO, f.LRO = feats[featTSO], feats[featGSO], feats[featGRO], feats[featLRO]
		}
		b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
		if err != nil {
			errs = append(errs, fmt.Sprintf("default congestion control: %v", err))
		} else {
			f.CongestionControl = strings.TrimSpace(string(b))
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err.Error())
	}
	f.Err = strings.Join(errs, "; ")
	f.Warnings = f.warnings(dev.Attrs().MTU, rate, ingress)
	return f
}

// offloads reads a device's ethtool features by name.
func offloads(iface string) (map[string]bool, error) {
	et, err := ethtool.NewEthtool()
	if err != nil {
		return nil, fmt.Errorf("ethtool: %w", err)
	}
	defer et.Close()
	feats, err := et.Features(iface)
	if err != nil {
		return nil, fmt.Errorf("ethtool features of %s: %w", iface, err)
	}
	return feats, nil
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
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b LinkFacts) int { return strings.Compare(a.Iface, b.Iface) })
	return out
}

// DefaultRouteFacts are the facts of the interface of the default route,
// the one lanes shapes unless configured otherwise (for `lanes doctor`
// without a daemon): not shaped, so without warnings.
func DefaultRouteFacts() (LinkFacts, error) {
	name, err := DefaultRouteInterface()
	if err != nil {
		return LinkFacts{}, err
	}
	dev, err := netlink.LinkByName(name)
	if err != nil {
		return LinkFacts{}, fmt.Errorf("interface %s: %w", name, err)
	}
	return readLinkFacts(netns.None(), dev, 0, false, nil), nil
}

package netprobe

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
)

// ethtool feature names of the offloads ReadLink reads.
const (
	featTSO = "tx-tcp-segmentation"
	featGSO = "tx-generic-segmentation"
	featGRO = "rx-gro"
	featLRO = "rx-lro"
)

// ReadLink reads dev's offloads, segment size limits and the default TCP
// congestion control of the calling thread's network namespace. What
// cannot be read is in Err; the rest is what could.
func ReadLink(dev netlink.Link) Link {
	a := dev.Attrs()
	l := Link{Iface: a.Name, GSOMax: a.GSOMaxSize, GSOIPv4Max: a.GSOIPv4MaxSize, GROMax: a.GROMaxSize, GROIPv4Max: a.GROIPv4MaxSize}
	var errs []string
	if feats, err := offloads(l.Iface); err != nil {
		errs = append(errs, err.Error())
	} else {
		l.TSO, l.GSO, l.GRO, l.LRO = feats[featTSO], feats[featGSO], feats[featGRO], feats[featLRO]
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control"); err != nil {
		errs = append(errs, fmt.Sprintf("default congestion control: %v", err))
	} else {
		l.CongestionControl = strings.TrimSpace(string(b))
	}
	l.Err = strings.Join(errs, "; ")
	return l
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

// DefaultRouteInterface returns the interface of the default route (IPv4,
// else IPv6): the one lanes shapes unless configured otherwise.
func DefaultRouteInterface() (string, error) {
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteList(nil, family)
		if err != nil {
			return "", fmt.Errorf("list routes: %w", err)
		}
		for _, r := range routes {
			if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.LinkIndex > 0 {
				l, err := netlink.LinkByIndex(r.LinkIndex)
				if err != nil {
					return "", fmt.Errorf("link of default route: %w", err)
				}
				return l.Attrs().Name, nil
			}
		}
	}
	return "", errors.New("no default route")
}

// DefaultRouteLink reads the interface of the default route.
func DefaultRouteLink() (Link, error) {
	name, err := DefaultRouteInterface()
	if err != nil {
		return Link{}, err
	}
	dev, err := netlink.LinkByName(name)
	if err != nil {
		return Link{}, fmt.Errorf("interface %s: %w", name, err)
	}
	return ReadLink(dev), nil
}

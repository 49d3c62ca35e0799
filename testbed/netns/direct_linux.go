package netns

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/vishvananda/netlink"
)

// Direct is two namespaces joined by one veth, no router and no
// emulator: for experiments whose subject is a host's CPU, not a link.
type Direct struct {
	Prefix   string
	Src, Dst string
	// SrcDev and DstDev are the veth's ends, SrcAddr and DstAddr their
	// addresses (198.18.30.1 and .2/24).
	SrcDev, DstDev   string
	SrcAddr, DstAddr netip.Addr
	logf             func(string, ...any)
}

// NewDirect builds a Direct pair; on error everything built is removed.
func NewDirect(logf func(string, ...any)) (*Direct, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	p := namePrefix(os.Getpid(), int(topoSeq.Add(1)))
	d := &Direct{Prefix: p, Src: p + "s", Dst: p + "d", SrcDev: p + "a", DstDev: p + "b",
		SrcAddr: netip.AddrFrom4([4]byte{198, 18, 30, 1}), DstAddr: netip.AddrFrom4([4]byte{198, 18, 30, 2}), logf: logf}
	if err := d.build(); err != nil {
		if cerr := d.Close(); cerr != nil {
			logf("cleanup after failed build of %s: %v", p, cerr)
		}
		return nil, fmt.Errorf("build direct pair %s: %w", p, err)
	}
	logf("direct pair %s up", p)
	return d, nil
}

func (d *Direct) build() error {
	for _, ns := range []string{d.Src, d.Dst} {
		if err := createNS(ns, false); err != nil {
			return err
		}
	}
	sh, closeS, err := handle(d.Src)
	if err != nil {
		return err
	}
	defer closeS()
	dh, closeD, err := handle(d.Dst)
	if err != nil {
		return err
	}
	defer closeD()
	if err := addVeth(sh, d.SrcDev, d.DstDev, d.Dst); err != nil {
		return err
	}
	for _, s := range []struct {
		h    *netlink.Handle
		dev  string
		addr netip.Addr
	}{{sh, d.SrcDev, d.SrcAddr}, {dh, d.DstDev, d.DstAddr}} {
		l, err := s.h.LinkByName(s.dev)
		if err != nil {
			return fmt.Errorf("find %s: %w", s.dev, err)
		}
		a := &netlink.Addr{IPNet: &net.IPNet{IP: s.addr.AsSlice(), Mask: net.CIDRMask(24, 32)}}
		if err := s.h.AddrAdd(l, a); err != nil {
			return fmt.Errorf("address %s on %s: %w", s.addr, s.dev, err)
		}
		if err := s.h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", s.dev, err)
		}
		lo, err := s.h.LinkByName("lo")
		if err == nil {
			err = s.h.LinkSetUp(lo)
		}
		if err != nil {
			return fmt.Errorf("set lo up: %w", err)
		}
	}
	for _, w := range []struct {
		h   *netlink.Handle
		dev string
	}{{sh, d.SrcDev}, {dh, d.DstDev}} {
		if err := waitOperUp(w.h, w.dev, 3*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// Close kills any process left in the pair's namespaces and deletes them.
func (d *Direct) Close() error {
	var first error
	for _, ns := range []string{d.Src, d.Dst} {
		if err := removeNS(ns, d.logf); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("close direct pair %s: %w", d.Prefix, first)
	}
	return nil
}

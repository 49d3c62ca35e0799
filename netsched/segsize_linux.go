package netsched

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

func sizesOf(dev netlink.Link) SegmentSizes {
	a := dev.Attrs()
	return SegmentSizes{GSO: a.GSOMaxSize, GSOIPv4: a.GSOIPv4MaxSize, GRO: a.GROMaxSize, GROIPv4: a.GROIPv4MaxSize}
}

// setSizes makes dev's limits want (0: leave it). The IPv4 limits go
// after the others and are compared with the device as it is then:
// lowering gso_max_size below 64 KiB lowers gso_ipv4_max_size with it,
// raising it does not.
func (e *Enforcer) setSizes(dev netlink.Link, want SegmentSizes) error {
	name := dev.Attrs().Name
	type step struct {
		what string
		have func(SegmentSizes) uint32
		want uint32
		set  func(netlink.Link, int) error
	}
	rounds := [][]step{{
		{"gso_max_size", func(s SegmentSizes) uint32 { return s.GSO }, want.GSO, e.h.LinkSetGSOMaxSize},
		{"gro_max_size", func(s SegmentSizes) uint32 { return s.GRO }, want.GRO, e.h.LinkSetGROMaxSize},
	}, {
		{"gso_ipv4_max_size", func(s SegmentSizes) uint32 { return s.GSOIPv4 }, want.GSOIPv4, e.h.LinkSetGSOIPv4MaxSize},
		{"gro_ipv4_max_size", func(s SegmentSizes) uint32 { return s.GROIPv4 }, want.GROIPv4, e.h.LinkSetGROIPv4MaxSize},
	}}
	var errs []error
	for _, round := range rounds {
		cur, err := e.h.LinkByIndex(dev.Attrs().Index)
		if err != nil {
			return fmt.Errorf("read segment sizes of %s: %w", name, err)
		}
		have := sizesOf(cur)
		for _, s := range round {
			if s.want == 0 || s.have(have) == 0 || s.want == s.have(have) {
				continue
			}
			e.logf("netsched: ip link set dev %s %s %d", name, s.what, s.want)
			if err := s.set(cur, int(s.want)); err != nil {
				errs = append(errs, fmt.Errorf("set %s of %s to %d: %w", s.what, name, s.want, hint(err)))
			}
		}
	}
	return errors.Join(errs...)
}

// boundSegments bounds dev's GSO (and, with ingress, GRO) sizes for p,
// remembering the originals in st the first time.
func (e *Enforcer) boundSegments(dev netlink.Link, st *ifaceState, p Plan) error {
	cur := sizesOf(dev)
	if st.sizes == nil {
		orig := cur
		st.sizes = &orig
		// Record first, then change.
		if err := e.record(dev.Attrs().Name, p.Rate, st); err != nil {
			return err
		}
	}
	want := st.sizes.bounded(segmentCap(p.Rate), p.Ingress)
	if want == cur {
		return nil
	}
	if err := e.setSizes(dev, want); err != nil {
		return fmt.Errorf("bound segment sizes: %w", err)
	}
	return nil
}

// restoreSegments gives dev its original limits back.
func (e *Enforcer) restoreSegments(dev netlink.Link, st *ifaceState) error {
	if st.sizes == nil {
		return nil
	}
	if err := e.setSizes(dev, *st.sizes); err != nil {
		return fmt.Errorf("restore segment sizes: %w", err)
	}
	st.sizes = nil
	return nil
}

// OriginalSizes returns the segment sizes iface had before lanes bounded
// them (also in its state record: a run after a crash gives them back with
// RestoreSizes).
func (e *Enforcer) OriginalSizes(iface string) (SegmentSizes, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.ifaces[iface]
	if st == nil || st.sizes == nil {
		return SegmentSizes{}, false
	}
	return *st.sizes, true
}

// RestoreSizes sets iface's segment sizes to orig (those a crashed run
// recorded), in the caller's network namespace or the one WithNetns names.
func RestoreSizes(logf func(string, ...any), iface string, orig SegmentSizes, opts ...Option) error {
	e, done, err := handleOnly(logf, opts)
	if err != nil {
		return fmt.Errorf("restore segment sizes: %w", err)
	}
	defer done()
	dev, err := e.h.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("restore segment sizes: interface %s: %w", iface, err)
	}
	return e.setSizes(dev, orig)
}

package netsched

import (
	"errors"
	"fmt"
	"math"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
)

// Receive windows (bpf/lanes.c, rx_egress): lanes shapes downloads on an
// IFB after the bottleneck, so it reorders only what already crossed the
// link; a sender's slow start or bandwidth probes queue in the link first,
// ahead of everyone's packets. Lowering the window each download's ACKs
// advertise to gain x its class's ceiling x its RTT keeps that queue
// under about (gain-1) round trips: TCP's own flow control slows the
// sender.

// rxGainUnit is the fixed-point unit of rx_limit.gain.
const rxGainUnit = 1024

// syncRxWindow makes rx_window hold the receive limits of dev's classes
// under p: none without p.Ingress or p.RxWindow, or where packets are
// classified by port rules.
func (e *Enforcer) syncRxWindow(dev netlink.Link, p Plan) error {
	if e.objs == nil {
		return nil
	}
	idx := uint32(dev.Attrs().Index)
	want := map[lanesbpf.LanesRxKey]lanesbpf.LanesRxLimit{}
	if p.Ingress && p.RxWindow > 0 && !e.ports.ingress && e.rxErr == nil {
		gain := uint32(math.Round(p.RxWindow * rxGainUnit))
		for _, c := range p.Classes {
			lim := lanesbpf.LanesRxLimit{CeilBps: c.Ceil / 8, Gain: gain}
			want[lanesbpf.LanesRxKey{Ifindex: idx, Cls: c.ClassID}] = lim
			if c.ClassID == p.Default {
				want[lanesbpf.LanesRxKey{Ifindex: idx}] = lim
			}
		}
	}
	var errs []error
	var (
		k     lanesbpf.LanesRxKey
		v     lanesbpf.LanesRxLimit
		stale []lanesbpf.LanesRxKey
	)
	it := e.objs.RxWindow.Iterate()
	for it.Next(&k, &v) {
		if _, ok := want[k]; k.Ifindex == idx && !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		errs = append(errs, fmt.Errorf("list receive limits: %w", err))
	}
	for _, k := range stale {
		if err := e.objs.RxWindow.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete receive limit %+v: %w", k, err))
		}
	}
	for k, v := range want {
		if err := e.objs.RxWindow.Put(k, v); err != nil {
			errs = append(errs, fmt.Errorf("receive limit of class %x on %s: %w", k.Cls, p.Iface, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("download receive windows: %w", err)
	}
	return nil
}

// clearRxWindow drops dev's receive limits (teardown).
func (e *Enforcer) clearRxWindow(dev netlink.Link) error {
	return e.syncRxWindow(dev, Plan{Iface: dev.Attrs().Name})
}

// RxWindowStats count what the receive-window bound did since the
// Enforcer started.
type RxWindowStats struct {
	Sockets uint64 // connections whose window scale lanes learnt: bounded
	Lowered uint64 // packets whose advertised window was lowered
}

// RxWindowStats reads the receive-window counters; ok is false where the
// mechanism is unavailable.
func (e *Enforcer) RxWindowStats() (s RxWindowStats, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.objs == nil || e.rxErr != nil {
		return s, false
	}
	var per uint64
	for i, dst := range []*uint64{&s.Sockets, &s.Lowered} {
		if err := e.objs.RxStats.Lookup(uint32(i), &per); err != nil {
			return s, false
		}
		*dst = per
	}
	return s, true
}

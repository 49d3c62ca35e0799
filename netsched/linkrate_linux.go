package netsched

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/lanes-qos/lanes/lane"
)

// SetLinkRate changes, at run time, the rate of the link in one direction
// (download: the IFBs' trees) on every shaped interface, for the auto
// rate's controller (package autorate): the root class gets rate as its
// rate and ceiling, and every lane's class its planned (or tuned) rate
// and ceiling scaled by rate over the plan's link rate, never below the
// smallest class rate; a FIFO leaf's limit follows its class's ceiling
// (Class.withCeil). All in place: classes and leaves keep their packets.
// rate is at most the plan's link rate (the configured maximum). The
// change holds across Apply until RestoreLinkRates; it is not recorded:
// a stop removes the trees, and a start after a crash builds them at the
// configured rate. The changes are not logged (the controller publishes
// its decisions); on an error the interfaces changed go back.
func (e *Enforcer) SetLinkRate(download bool, rate uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ifaces := e.shapedLocked(download)
	if len(ifaces) == 0 {
		return fmt.Errorf("link rate: %w%s", ErrNotShaped, dirWords(download))
	}
	top := e.ifaces[ifaces[0]].plan.Rate
	if rate < minRate || rate > top {
		return fmt.Errorf("link rate %s is outside %s..%s (the configured rate)", lane.FormatRate(rate), lane.FormatRate(minRate), lane.FormatRate(top))
	}
	d := dirIndex(download)
	old := e.link[d]
	if old == rate || old == 0 && rate == top {
		return nil
	}
	e.link[d] = rate
	var done []string
	for _, name := range ifaces {
		if err := e.changeLink(name, download); err != nil {
			e.link[d] = old
			for _, n := range done {
				e.changeLink(n, download)
			}
			return fmt.Errorf("link rate: %w", err)
		}
		done = append(done, name)
	}
	return nil
}

// LinkRate returns the link's rate in that direction now: the last
// SetLinkRate's, else the plan's; 0 when nothing is shaped.
func (e *Enforcer) LinkRate(download bool) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range e.shapedLocked(download) {
		return e.linkOf(e.ifaces[name].plan, download)
	}
	return 0
}

// SetBottleneckQueue tells the idletime gates of a direction that its
// bottleneck lies beyond lanes and holds about queue of the foreground
// there (rate = "auto": the queue its law steers to; 0: none known).
// After the foreground's last packet the bottleneck is still busy with
// what it queued for about that long, so while the foreground sends full
// packets a gate's PI spans at least queue (at most 100 ms, as the
// spacing): a background released earlier would take the bottleneck's
// capacity from the foreground, not idle capacity.
func (e *Enforcer) SetBottleneckQueue(download bool, queue time.Duration) error {
	if queue < 0 {
		return fmt.Errorf("bottleneck queue %v is negative", queue)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setBottleneckLocked(download, queue)
	return nil
}

// setBottleneckLocked is SetBottleneckQueue's work. Callers hold e.mu.
func (e *Enforcer) setBottleneckLocked(download bool, queue time.Duration) {
	d := dirIndex(download)
	e.bneckQ[d] = queue
	for _, name := range e.shapedLocked(download) {
		st := e.ifaces[name]
		if g := st.gates[d]; g != nil {
			g.setSpacing(e.linkOf(st.plan, download), st.plan, queue)
		}
	}
}

// RestoreLinkRates puts the plans' link rates back in both directions,
// and forgets the bottleneck queues (SetBottleneckQueue).
func (e *Enforcer) RestoreLinkRates() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, download := range []bool{false, true} {
		d := dirIndex(download)
		if e.bneckQ[d] != 0 {
			e.setBottleneckLocked(download, 0)
		}
		if e.link[d] == 0 {
			continue
		}
		e.link[d] = 0
		for _, name := range e.shapedLocked(download) {
			if err := e.changeLink(name, download); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func dirIndex(download bool) int {
	if download {
		return 1
	}
	return 0
}

// linkOf is the rate of p's root class in that direction. Callers hold
// e.mu.
func (e *Enforcer) linkOf(p Plan, download bool) uint64 {
	if r := e.link[dirIndex(download)]; r != 0 {
		return min(r, p.Rate)
	}
	return p.Rate
}

// effectiveRates is c's rate and ceiling as built: its run-time tuning
// (tune_linux.go) if any, scaled to the link rate. Callers hold e.mu.
func (e *Enforcer) effectiveRates(p Plan, c Class, download bool) rates {
	return e.scaled(p, e.classRates(c, download), download)
}

// scaled is r scaled by the link rate over p's. Callers hold e.mu.
func (e *Enforcer) scaled(p Plan, r rates, download bool) rates {
	link := e.linkOf(p, download)
	if link == p.Rate || p.Rate == 0 {
		return r
	}
	f := float64(link) / float64(p.Rate)
	rate := max(uint64(float64(r.rate)*f), minRate)
	return rates{rate, max(uint64(float64(r.ceil)*f), rate)}
}

// changeLink makes iface's tree (or its IFB's) match the link rate in
// place: the root class, then each lane's class and FIFO leaf. Callers
// hold e.mu.
func (e *Enforcer) changeLink(iface string, download bool) error {
	st := e.ifaces[iface]
	link, err := e.treeDev(iface, download)
	if err != nil {
		return err
	}
	dev := link.Attrs().Name
	e.quietTC = true
	defer func() { e.quietTC = false }()
	rate := e.linkOf(st.plan, download)
	top := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: link.Attrs().Index, Parent: ClassID(Major, 0), Handle: ClassID(Major, rootMinor)},
		htbAttrs(rate, rate, 0))
	if err := e.h.ClassChange(top); err != nil {
		return fmt.Errorf("change root class of %s: %w", dev, hint(err))
	}
	for _, c := range st.plan.Classes {
		if err := e.applyClass(iface, link, c, download, e.effectiveRates(st.plan, c, download), true); err != nil {
			return err
		}
	}
	if g := st.gates[dirIndex(download)]; g != nil {
		g.setSpacing(rate, st.plan, e.bneckQ[dirIndex(download)])
	}
	return nil
}

// SetProbeClass makes the echo replies with ICMP identifier id (a
// Pinger's, Pinger.ID) take class on the download path (lanes_ingress),
// as its requests take their socket's label on the upload path; class 0
// forgets id. The entry lives in the classifier's map: it goes with the
// programs when lanesd stops.
func (e *Enforcer) SetProbeClass(id uint16, class uint32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.objs == nil || e.ports.ingress {
		return ErrNoProbeClass
	}
	// The classifier reads the identifier as it lies in the packet.
	key := binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, id))
	if class == 0 {
		if err := e.objs.ProbeClass.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("probe class: forget %d: %w", id, err)
		}
		return nil
	}
	if err := e.objs.ProbeClass.Put(key, class); err != nil {
		return fmt.Errorf("probe class: %d to %x: %w", id, class, err)
	}
	return nil
}

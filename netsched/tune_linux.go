package netsched

import (
	"errors"
	"fmt"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/lanes-qos/lanes/lane"
)

// tuneKey is a lane's class in one direction.
type tuneKey struct {
	lane     string
	download bool
}

// rates are a class's rate and ceiling in bits/s.
type rates struct{ rate, ceil uint64 }

// ErrNotShaped is returned by the run-time class changes when no
// interface is shaped (in the direction asked for).
var ErrNotShaped = errors.New("no interface is shaped")

// SetLaneRate changes the guaranteed rate (bits/s) of the lane's HTB class
// at run time, for a controller: on every shaped interface (upload) or on
// their IFBs (download), in place — the class keeps its leaf and its
// queue. A class whose planned ceiling is its rate (a lane with a rate
// that may not borrow) keeps its ceiling equal to its rate; any other
// keeps its ceiling, and a rate above it is refused. The change holds
// until RestoreLane, also across Apply; it is not recorded: a stop puts
// the plan back (RestoreLane, or the tree goes), and a start after a
// crash builds the tree from the configuration.
func (e *Enforcer) SetLaneRate(laneName string, download bool, rate uint64) error {
	return e.tune(laneName, download, func(plan, cur rates, link uint64) (rates, error) {
		if rate < minRate || rate > link {
			return cur, fmt.Errorf("rate %s is outside %s..%s (the link)", lane.FormatRate(rate), lane.FormatRate(minRate), lane.FormatRate(link))
		}
		if plan.ceil == plan.rate {
			return rates{rate, rate}, nil
		}
		if rate > cur.ceil {
			return cur, fmt.Errorf("rate %s is above the class's ceiling %s", lane.FormatRate(rate), lane.FormatRate(cur.ceil))
		}
		return rates{rate, cur.ceil}, nil
	})
}

// SetLaneCeil changes the ceiling (bits/s) of the lane's HTB class at run
// time, as SetLaneRate: at least the class's rate, at most the link's.
func (e *Enforcer) SetLaneCeil(laneName string, download bool, ceil uint64) error {
	return e.tune(laneName, download, func(plan, cur rates, link uint64) (rates, error) {
		if ceil > link {
			return cur, fmt.Errorf("ceiling %s is above the link's %s", lane.FormatRate(ceil), lane.FormatRate(link))
		}
		if ceil < cur.rate {
			return cur, fmt.Errorf("ceiling %s is below the class's rate %s", lane.FormatRate(ceil), lane.FormatRate(cur.rate))
		}
		return rates{cur.rate, ceil}, nil
	})
}

// LaneRates returns the rate and ceiling (bits/s) the lane's class has now
// in that direction, on the first shaped interface (every interface has
// the same plan).
func (e *Enforcer) LaneRates(laneName string, download bool) (rate, ceil uint64, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range e.shapedLocked(download) {
		st := e.ifaces[name]
		c, ok := st.plan.Class(laneName)
		if !ok {
			return 0, 0, fmt.Errorf("lane %s has no class on %s", laneName, name)
		}
		r := e.classRates(c, download)
		return r.rate, r.ceil, nil
	}
	return 0, 0, fmt.Errorf("lane %s: %w%s", laneName, ErrNotShaped, dirWords(download))
}

// RestoreLane ends the run-time changes of the lane's classes, in both
// directions, putting the planned rate and ceiling back.
func (e *Enforcer) RestoreLane(laneName string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, download := range []bool{false, true} {
		k := tuneKey{laneName, download}
		was, ok := e.tuned[k]
		if !ok {
			continue
		}
		delete(e.tuned, k)
		for _, name := range e.shapedLocked(download) {
			c, ok := e.ifaces[name].plan.Class(laneName)
			if !ok {
				continue
			}
			if err := e.changeClass(name, c, download, rates{c.Rate, c.Ceil}, was.ceil); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func dirWords(download bool) string {
	if download {
		return " with download shaping"
	}
	return ""
}

// shapedLocked lists the shaped interfaces (with an IFB, for download),
// sorted. Callers hold e.mu.
func (e *Enforcer) shapedLocked(download bool) []string {
	var out []string
	for name, st := range e.ifaces {
		if !download || st.ifb != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// classRates is the class's rate and ceiling with any run-time change.
// Callers hold e.mu.
func (e *Enforcer) classRates(c Class, download bool) rates {
	if r, ok := e.tuned[tuneKey{c.Lane, download}]; ok {
		return r
	}
	return rates{c.Rate, c.Ceil}
}

// tune computes the class's new rates with change and makes them so on
// every shaped interface; on an error nothing stays changed.
func (e *Enforcer) tune(laneName string, download bool, change func(plan, cur rates, link uint64) (rates, error)) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ifaces := e.shapedLocked(download)
	if len(ifaces) == 0 {
		return fmt.Errorf("lane %s: %w%s", laneName, ErrNotShaped, dirWords(download))
	}
	st := e.ifaces[ifaces[0]]
	c, ok := st.plan.Class(laneName)
	if !ok {
		return fmt.Errorf("lane %s has no class on %s", laneName, ifaces[0])
	}
	k := tuneKey{laneName, download}
	old, had := e.tuned[k]
	cur := e.classRates(c, download)
	next, err := change(rates{c.Rate, c.Ceil}, cur, st.plan.Rate)
	if err != nil {
		return fmt.Errorf("lane %s: %w", laneName, err)
	}
	if next == cur {
		return nil
	}
	e.tuned[k] = next
	var done []string
	for _, name := range ifaces {
		pc, ok := e.ifaces[name].plan.Class(laneName)
		if !ok {
			continue
		}
		if err := e.changeClass(name, pc, download, next, cur.ceil); err != nil {
			if had {
				e.tuned[k] = old
			} else {
				delete(e.tuned, k)
			}
			for _, n := range done {
				pc, _ := e.ifaces[n].plan.Class(laneName)
				e.changeClass(n, pc, download, cur, next.ceil)
			}
			return fmt.Errorf("lane %s: %w", laneName, err)
		}
		done = append(done, name)
	}
	return nil
}

// changeClass changes the lane's HTB class on iface (or its IFB) in place
// to r (in the plan's scale: scaled to the link rate here); when the
// ceiling moved from prevCeil, a FIFO leaf's limit follows it
// (Class.withCeil; the kernel changes a FIFO of the same kind and handle
// in place, keeping its packets). c is the plan's class. Callers hold
// e.mu.
func (e *Enforcer) changeClass(iface string, c Class, download bool, r rates, prevCeil uint64) error {
	st := e.ifaces[iface]
	link, err := e.treeDev(iface, download)
	if err != nil {
		return err
	}
	dev := link.Attrs().Name
	prev := e.scaled(st.plan, rates{r.rate, prevCeil}, download)
	r = e.scaled(st.plan, r, download)
	e.logf("netsched: tc class change dev %s parent %x:%x classid %x:%x htb rate %d ceil %d burst %d cburst %d prio %d (lane %s, run time)",
		dev, Major, rootMinor, c.ClassID>>16, c.ClassID&0xffff, r.rate, r.ceil, htbBurst(r.rate), htbBurst(r.ceil), c.Prio, c.Lane)
	return e.applyClass(iface, link, c, download, r, r.ceil != prev.ceil)
}

// applyClass changes c's HTB class on link (iface's device or IFB) to r,
// and with leaf its FIFO leaf's limit to r's ceiling. Callers hold e.mu.
func (e *Enforcer) applyClass(iface string, link netlink.Link, c Class, download bool, r rates, leaf bool) error {
	hc := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: link.Attrs().Index, Parent: ClassID(Major, rootMinor), Handle: c.ClassID},
		htbAttrs(r.rate, r.ceil, c.Prio))
	if err := e.h.ClassChange(hc); err != nil {
		return fmt.Errorf("change class of lane %s on %s: %w", c.Lane, link.Attrs().Name, hint(err))
	}
	if !leaf {
		return nil
	}
	l := c
	if download {
		l = l.download()
	}
	if l.Leaf != LeafHeadDrop && l.Leaf != LeafBfifo {
		return nil
	}
	l = l.withCeil(r.ceil)
	if l.Leaf == LeafBfifo {
		// The floor buildTree gives an IFB's byte FIFOs.
		if up, err := e.h.LinkByName(iface); err == nil {
			l.Limit = max(l.Limit, ingressFloor(up, e.ifaces[iface]))
		}
	}
	return e.replaceLeaf(link, l)
}

// treeDev is the device of iface's tree in a direction: iface itself, or
// its IFB for download. Callers hold e.mu.
func (e *Enforcer) treeDev(iface string, download bool) (netlink.Link, error) {
	dev := iface
	if download {
		dev = e.ifaces[iface].ifb
	}
	link, err := e.h.LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", dev, err)
	}
	return link, nil
}

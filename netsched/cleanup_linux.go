package netsched

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/lanes-qos/lanes/internal/netprobe"
)

// Cleanup removes what a crashed run of lanes left in the network namespace
// (the caller's, or the one WithNetns names): root qdiscs with lanes'
// handle (the kernel's default root qdisc comes back), lanes' tc filters,
// lanes' IFB devices, and the bpffs directory PinDir. An original root
// tree that was not the kernel's default comes back with RestoreTree and
// the snapshot the crashed run recorded (Enforcer.OriginalTree).
func Cleanup(logf func(string, ...any), opts ...Option) error {
	e, done, err := handleOnly(logf, opts)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	defer done()
	links, err := e.h.LinkList()
	if err != nil {
		return fmt.Errorf("cleanup: list links: %w", err)
	}
	var errs []error
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, ifbPrefix) {
			logf("netsched: cleanup: ip link del %s", l.Attrs().Name)
			if err := e.h.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", l.Attrs().Name, err))
			}
			continue
		}
		st := &ifaceState{}
		if hasLanesFilters(e, l) {
			st.addedClsact = true // only if nothing else is left on it
		}
		if !st.addedClsact && !e.rootIsOurs(l) {
			continue
		}
		logf("netsched: cleanup: removing lanes' tree from %s", l.Attrs().Name)
		if err := e.teardown(l, st); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(PinDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove %s: %w", PinDir, err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}

func hasLanesFilters(e *Enforcer, l netlink.Link) bool {
	for _, parent := range []uint32{netlink.HANDLE_MIN_EGRESS, netlink.HANDLE_MIN_INGRESS} {
		fs, err := e.h.FilterList(l, parent)
		if err != nil {
			continue
		}
		for _, f := range fs {
			if bf, ok := f.(*netlink.BpfFilter); ok && strings.HasPrefix(bf.Name, filterPrefix) {
				return true
			}
			if u, ok := f.(*netlink.U32); ok && u.Priority == redirPrio && strings.HasPrefix(linkName(e, u.RedirIndex), ifbPrefix) {
				return true
			}
		}
	}
	return false
}

// DefaultRouteInterface returns the interface of the IPv4 default route, or
// of the IPv6 one when there is no IPv4 default route.
func DefaultRouteInterface() (string, error) { return netprobe.DefaultRouteInterface() }

func linkName(e *Enforcer, index int) string {
	if l, err := e.h.LinkByIndex(index); err == nil {
		return l.Attrs().Name
	}
	return ""
}

// handleOnly returns an Enforcer that has only a netlink handle, in the
// caller's network namespace or the one WithNetns names: what Cleanup,
// RestoreSizes and RestoreTree need without a running Enforcer. done
// releases it.
func handleOnly(logf func(string, ...any), opts []Option) (e *Enforcer, done func(), err error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	e = &Enforcer{logf: logf, ns: netns.None()}
	if o.netnsPath != "" {
		if e.ns, err = netnsFromPath(o.netnsPath); err != nil {
			return nil, nil, err
		}
		e.h, err = netlink.NewHandleAt(e.ns)
	} else {
		e.h, err = netlink.NewHandle()
	}
	if err != nil {
		e.closeNs()
		return nil, nil, fmt.Errorf("open netlink: %w", err)
	}
	return e, func() { e.h.Close(); e.closeNs() }, nil
}

package monitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

const (
	// netRecvBuffer is the notification sockets' receive buffer: room for
	// thousands of notifications while the consumer is busy.
	netRecvBuffer = 1 << 20
	// resubscribeMax bounds the wait between attempts to subscribe again
	// after the sockets failed.
	resubscribeMax = 10 * time.Second
	// dumpTries is how often a listing interrupted by a concurrent change
	// is tried before the partial result is taken.
	dumpTries = 5
)

// NetMonitor watches a network namespace's links, addresses and default
// routes through rtnetlink notifications, and tracks its connectivity.
type NetMonitor struct {
	o       NetOptions
	logf    func(string, ...any)
	ns      netns.NsHandle // netns.None() for the caller's
	h       *netlink.Handle
	cancel  context.CancelFunc
	done    chan struct{}
	resyncs atomic.Uint64

	// Loop-only, but Connectivity reads conn under connMu.
	st     netState
	connMu sync.Mutex
	conn   connState
	known  bool // conn was computed once
}

// netState is what the monitor knows of the namespace.
type netState struct {
	links  map[int]linkState
	addrs  map[int]map[netip.Prefix]bool // link → address → global
	routes map[routeKey]bool
}

type linkState struct {
	name     string
	oper     string
	up       bool
	loopback bool
}

// routeKey is one default route's next hop (multipath routes have one per
// hop).
type routeKey struct {
	family int
	index  int
	gw     netip.Addr
	metric int
}

type connState struct {
	up     bool
	index  int
	ifname string
	gw     netip.Addr
}

// WatchNet starts watching links, addresses and default routes in the
// namespace o.Netns (or the caller's). The links, addresses and default
// routes that exist are reported first, as if added, then the
// connectivity; then every change, until Close or ctx ends. When a
// notification socket fails or overflows, the monitor subscribes again,
// lists everything again and reports the differences, then a Resynced
// change. Needs no privilege in the caller's namespace; entering another
// needs CAP_SYS_ADMIN.
func WatchNet(ctx context.Context, o NetOptions) (*NetMonitor, error) {
	if o.OnChange == nil {
		return nil, errors.New("watch network: no OnChange callback")
	}
	m := &NetMonitor{o: o, logf: o.Logf, ns: netns.None(), done: make(chan struct{})}
	if m.logf == nil {
		m.logf = func(string, ...any) {}
	}
	if o.Netns != "" {
		ns, err := netns.GetFromPath(o.Netns)
		if err != nil {
			return nil, fmt.Errorf("watch network: open namespace %s: %w", o.Netns, err)
		}
		m.ns = ns
	}
	h, err := netlink.NewHandleAt(m.ns, unix.NETLINK_ROUTE)
	if err != nil {
		m.closeNS()
		return nil, fmt.Errorf("watch network: netlink handle: %w", err)
	}
	m.h = h
	m.st = netState{links: map[int]linkState{}, addrs: map[int]map[netip.Prefix]bool{}, routes: map[routeKey]bool{}}
	// Subscribe before listing, so that no change falls in between.
	s, err := m.subscribe()
	if err != nil {
		h.Close()
		m.closeNS()
		return nil, fmt.Errorf("watch network: %w", err)
	}
	if err := m.relist(); err != nil {
		s.close()
		h.Close()
		m.closeNS()
		return nil, fmt.Errorf("watch network: %w", err)
	}
	m.connectivity()
	ctx, m.cancel = context.WithCancel(ctx)
	go m.run(ctx, s)
	return m, nil
}

// Close stops the monitor and waits until its goroutine has ended (no
// OnChange call runs after Close returns). Safe to call more than once.
// It always returns nil.
func (m *NetMonitor) Close() error {
	m.cancel()
	<-m.done
	return nil
}

// Resyncs is how many times the monitor listed everything again after
// losing its notifications.
func (m *NetMonitor) Resyncs() uint64 { return m.resyncs.Load() }

// Connectivity returns the connectivity as last reported: whether the
// namespace is connected and through which interface.
func (m *NetMonitor) Connectivity() (up bool, ifname string) {
	m.connMu.Lock()
	defer m.connMu.Unlock()
	return m.conn.up, m.conn.ifname
}

func (m *NetMonitor) closeNS() {
	if m.ns.IsOpen() {
		m.ns.Close()
	}
}

// subs are the three notification subscriptions.
type subs struct {
	done   chan struct{}
	links  chan netlink.LinkUpdate
	addrs  chan netlink.AddrUpdate
	routes chan netlink.RouteUpdate
	// started[i] says that subscription i (links, addrs, routes) is
	// running and will close its channel.
	started [3]bool

	errMu sync.Mutex
	err   [3]error // each subscription's latest error
}

// lastErr returns subscription i's latest error.
func (s *subs) lastErr(i int) error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err[i]
}

func (m *NetMonitor) subscribe() (*subs, error) {
	s := &subs{
		done:   make(chan struct{}),
		links:  make(chan netlink.LinkUpdate, 64),
		addrs:  make(chan netlink.AddrUpdate, 64),
		routes: make(chan netlink.RouteUpdate, 64),
	}
	rcv := netRecvBuffer
	if m.o.recvBuf > 0 {
		rcv = m.o.recvBuf
	}
	ns := m.ns
	onErr := func(i int) func(error) {
		return func(err error) {
			s.errMu.Lock()
			s.err[i] = err
			s.errMu.Unlock()
		}
	}
	if err := netlink.LinkSubscribeWithOptions(s.links, s.done, netlink.LinkSubscribeOptions{
		Namespace: &ns, ErrorCallback: onErr(0), ReceiveBufferSize: rcv}); err != nil {
		s.close()
		return nil, fmt.Errorf("subscribe to link changes: %w", err)
	}
	s.started[0] = true
	if err := netlink.AddrSubscribeWithOptions(s.addrs, s.done, netlink.AddrSubscribeOptions{
		Namespace: &ns, ErrorCallback: onErr(1), ReceiveBufferSize: rcv}); err != nil {
		s.close()
		return nil, fmt.Errorf("subscribe to address changes: %w", err)
	}
	s.started[1] = true
	if err := netlink.RouteSubscribeWithOptions(s.routes, s.done, netlink.RouteSubscribeOptions{
		Namespace: &ns, ErrorCallback: onErr(2), ReceiveBufferSize: rcv}); err != nil {
		s.close()
		return nil, fmt.Errorf("subscribe to route changes: %w", err)
	}
	s.started[2] = true
	return s, nil
}

// close closes the sockets and drains the channels until the library's
// receivers have ended.
func (s *subs) close() {
	close(s.done)
	if s.started[0] {
		for range s.links {
		}
	}
	if s.started[1] {
		for range s.addrs {
		}
	}
	if s.started[2] {
		for range s.routes {
		}
	}
}

func (m *NetMonitor) run(ctx context.Context, s *subs) {
	defer close(m.done)
	defer m.closeNS()
	defer m.h.Close()
	kinds := [3]string{"link", "address", "route"}
	for {
		lost := -1
		select {
		case <-ctx.Done():
			s.close()
			return
		case u, ok := <-s.links:
			if !ok {
				lost = 0
				break
			}
			m.onLink(u)
		case u, ok := <-s.addrs:
			if !ok {
				lost = 1
				break
			}
			m.onAddr(u)
		case u, ok := <-s.routes:
			if !ok {
				lost = 2
				break
			}
			m.onRoute(u)
		}
		if lost < 0 {
			m.connectivity()
			continue
		}
		// The error is taken before the close, whose own errors follow.
		why := s.lastErr(lost)
		if why == nil {
			why = errors.New("socket closed")
		}
		s.close()
		if s = m.resync(ctx, fmt.Errorf("%s notifications lost: %w", kinds[lost], why)); s == nil {
			return
		}
	}
}

// resync subscribes again (retrying, with a growing wait, until ctx
// ends: nil) and lists everything again.
func (m *NetMonitor) resync(ctx context.Context, why error) *subs {
	m.logf("network monitor: %v: listing links, addresses and routes again", why)
	wait := 100 * time.Millisecond
	for {
		s, err := m.subscribe()
		if err == nil {
			if err = m.relist(); err == nil {
				m.resyncs.Add(1)
				m.connectivity()
				m.o.OnChange(NetChange{Kind: Resynced, Err: why})
				return s
			}
			s.close()
		}
		m.logf("network monitor: resync: %v (again in %s)", err, wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, resubscribeMax)
	}
}

// dump retries a listing that a concurrent change interrupted.
func dump[T any](f func() (T, error)) (T, error) {
	var v T
	var err error
	for range dumpTries {
		if v, err = f(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, nil // the last, possibly inconsistent, listing: changes under way will be notified
}

// relist lists links, addresses and default routes and reports how they
// differ from what the monitor knew.
func (m *NetMonitor) relist() error {
	links, err := dump(m.h.LinkList)
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	seen := map[int]bool{}
	for _, l := range links {
		seen[l.Attrs().Index] = true
		m.setLink(l)
	}
	for idx, ls := range m.st.links {
		if !seen[idx] {
			m.removeLink(idx, ls)
		}
	}
	addrs, err := dump(func() ([]netlink.Addr, error) { return m.h.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	want := map[int]map[netip.Prefix]bool{}
	for _, a := range addrs {
		p, ok := prefixOf(a.IPNet)
		if !ok {
			continue
		}
		if want[a.LinkIndex] == nil {
			want[a.LinkIndex] = map[netip.Prefix]bool{}
		}
		want[a.LinkIndex][p] = isGlobal(a.Scope, a.Flags)
	}
	for idx, as := range m.st.addrs {
		for p := range as {
			if _, ok := want[idx][p]; !ok {
				m.setAddr(idx, p, false, false)
			}
		}
	}
	for idx, as := range want {
		for _, p := range sortedPrefixes(as) {
			m.setAddr(idx, p, as[p], true)
		}
	}
	return m.relistRoutes()
}

// relistRoutes lists the default routes again and reports the
// differences. The kernel removes a link's IPv4 routes without a
// notification when the link goes down, so this runs after link changes
// too.
func (m *NetMonitor) relistRoutes() error {
	routes, err := dump(func() ([]netlink.Route, error) {
		return m.h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	want := map[routeKey]bool{}
	for _, r := range routes {
		for _, k := range defaultKeys(r) {
			want[k] = true
		}
	}
	for _, k := range sortedRoutes(m.st.routes) {
		if !want[k] {
			m.setRoute(k, false)
		}
	}
	for _, k := range sortedRoutes(want) {
		m.setRoute(k, true)
	}
	return nil
}

func (m *NetMonitor) onLink(u netlink.LinkUpdate) {
	idx := u.Attrs().Index
	if u.Header.Type == unix.RTM_DELLINK {
		if ls, ok := m.st.links[idx]; ok {
			m.removeLink(idx, ls)
		}
	} else if !m.setLink(u.Link) {
		return
	}
	if err := m.relistRoutes(); err != nil {
		m.logf("network monitor: %v", err)
	}
}

func (m *NetMonitor) onAddr(u netlink.AddrUpdate) {
	p, ok := prefixOf(&u.LinkAddress)
	if !ok {
		return
	}
	m.setAddr(u.LinkIndex, p, isGlobal(u.Scope, u.Flags), u.NewAddr)
}

// onRoute lists the default routes again when a notification concerns
// one, rather than applying the notification: it may be older than the
// monitor's state (a link's change lists the routes, and a route added
// and removed since then still has its notification queued), and applied
// it would report a route that is already gone, and connectivity through
// it, until the removal's own notification came.
func (m *NetMonitor) onRoute(u netlink.RouteUpdate) {
	if u.Table != unix.RT_TABLE_MAIN {
		return
	}
	added := u.Type == unix.RTM_NEWROUTE
	if !added && u.Type != unix.RTM_DELROUTE {
		return
	}
	keys := defaultKeys(u.Route)
	if len(keys) == 0 {
		return
	}
	err := m.relistRoutes()
	if err == nil {
		return
	}
	m.logf("network monitor: %v: applying the notification", err)
	for _, k := range keys {
		m.setRoute(k, added)
	}
}

// setLink records a link's state and reports it if new or changed; it
// returns whether it reported.
func (m *NetMonitor) setLink(l netlink.Link) bool {
	a := l.Attrs()
	ls := linkState{
		name:     a.Name,
		oper:     a.OperState.String(),
		up:       usable(a),
		loopback: a.Flags&net.FlagLoopback != 0,
	}
	if old, ok := m.st.links[a.Index]; ok && old == ls {
		return false
	}
	m.st.links[a.Index] = ls
	m.o.OnChange(NetChange{Kind: LinkChanged, Index: a.Index, Ifname: ls.name, Up: ls.up, Oper: ls.oper})
	return true
}

// removeLink forgets a link and its addresses, reporting each.
func (m *NetMonitor) removeLink(idx int, ls linkState) {
	for _, p := range sortedPrefixes(m.st.addrs[idx]) {
		m.setAddr(idx, p, false, false)
	}
	delete(m.st.links, idx)
	m.o.OnChange(NetChange{Kind: LinkChanged, Index: idx, Ifname: ls.name, Oper: "removed", Removed: true})
}

// usable says whether a link can carry traffic: operationally up, or
// "unknown" (virtual devices without a carrier notion: dummy, tun) while
// administratively up with its lower layer up.
func usable(a *netlink.LinkAttrs) bool {
	switch a.OperState {
	case netlink.OperUp:
		return true
	case netlink.OperUnknown:
		return a.RawFlags&unix.IFF_UP != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0
	}
	return false
}

func (m *NetMonitor) setAddr(idx int, p netip.Prefix, global, added bool) {
	as := m.st.addrs[idx]
	if added {
		if g, ok := as[p]; ok && g == global {
			return
		}
		if as == nil {
			as = map[netip.Prefix]bool{}
			m.st.addrs[idx] = as
		}
		as[p] = global
	} else {
		if _, ok := as[p]; !ok {
			return
		}
		delete(as, p)
		if len(as) == 0 {
			delete(m.st.addrs, idx)
		}
	}
	m.o.OnChange(NetChange{Kind: AddrChanged, Index: idx, Ifname: m.linkName(idx), Addr: p, Global: global, Added: added})
}

// linkName is the name of link idx: from the links seen, or asked of the
// kernel when the link's own event has not arrived yet (links, addresses
// and routes come on separate sockets, in no fixed order between them).
func (m *NetMonitor) linkName(idx int) string {
	if l, ok := m.st.links[idx]; ok && l.name != "" {
		return l.name
	}
	if l, err := m.h.LinkByIndex(idx); err == nil {
		return l.Attrs().Name
	}
	return ""
}

func (m *NetMonitor) setRoute(k routeKey, added bool) {
	if m.st.routes[k] == added {
		return
	}
	if added {
		m.st.routes[k] = true
	} else {
		delete(m.st.routes, k)
	}
	m.o.OnChange(NetChange{Kind: DefaultRouteChanged, Index: k.index, Ifname: m.linkName(k.index),
		Added: added, Gateway: k.gw, Metric: k.metric})
}

// connectivity computes the connectivity and reports it when it changed
// (up or down, or the interface carrying it): connected when a default
// route goes through a usable non-loopback link that has a global address
// of the route's family. Of several, the lowest metric wins, then IPv4,
// then the lowest interface index.
func (m *NetMonitor) connectivity() {
	var best *routeKey
	for k := range m.st.routes {
		l, ok := m.st.links[k.index]
		if !ok || !l.up || l.loopback || !m.hasGlobal(k.index, k.family) {
			continue
		}
		if best == nil || compareRoutes(k, *best) < 0 {
			best = &k
		}
	}
	c := connState{}
	if best != nil {
		c = connState{up: true, index: best.index, ifname: m.st.links[best.index].name, gw: best.gw}
	}
	m.connMu.Lock()
	changed := !m.known || c.up != m.conn.up || c.index != m.conn.index || c.ifname != m.conn.ifname
	m.conn, m.known = c, true
	m.connMu.Unlock()
	if changed {
		m.o.OnChange(NetChange{Kind: ConnectivityChanged, Up: c.up, Index: c.index, Ifname: c.ifname, Gateway: c.gw})
	}
}

func (m *NetMonitor) hasGlobal(idx, family int) bool {
	for p, global := range m.st.addrs[idx] {
		if global && familyOf(p.Addr()) == family {
			return true
		}
	}
	return false
}

func compareRoutes(a, b routeKey) int {
	return cmp.Or(cmp.Compare(a.metric, b.metric), cmp.Compare(a.family, b.family), cmp.Compare(a.index, b.index),
		a.gw.Compare(b.gw))
}

func familyOf(a netip.Addr) int {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// defaultKeys returns a main-table unicast default route's next hops.
func defaultKeys(r netlink.Route) []routeKey {
	if r.Table != unix.RT_TABLE_MAIN || r.Type != unix.RTN_UNICAST {
		return nil
	}
	if r.Dst != nil {
		if ones, _ := r.Dst.Mask.Size(); ones != 0 {
			return nil
		}
	}
	family := r.Family
	if family != unix.AF_INET && family != unix.AF_INET6 {
		return nil
	}
	gwOf := func(ip net.IP) netip.Addr {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return netip.Addr{}
		}
		return a.Unmap()
	}
	if len(r.MultiPath) > 0 {
		var ks []routeKey
		for _, h := range r.MultiPath {
			ks = append(ks, routeKey{family: family, index: h.LinkIndex, gw: gwOf(h.Gw), metric: r.Priority})
		}
		return ks
	}
	return []routeKey{{family: family, index: r.LinkIndex, gw: gwOf(r.Gw), metric: r.Priority}}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a, ones), true
}

// isGlobal: universe scope, and usable (not tentative, DAD not failed).
func isGlobal(scope, flags int) bool {
	return scope == unix.RT_SCOPE_UNIVERSE && flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0
}

func sortedPrefixes(m map[netip.Prefix]bool) []netip.Prefix {
	ps := make([]netip.Prefix, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	return ps
}

func sortedRoutes(m map[routeKey]bool) []routeKey {
	ks := make([]routeKey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, compareRoutes)
	return ks
}

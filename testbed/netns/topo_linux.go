package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

var topoSeq atomic.Int64

const (
	tableUp   = 100 // router table for packets from src: out through TunUp
	tableDown = 101 // router table for packets from dst: out through TunDown
)

// New builds a topology with the given number of paths (1 gives the line
// src — rtr — dst) and returns it. On error everything built so far is
// removed. logf receives progress messages; it may be nil.
func New(paths int, logf func(string, ...any)) (*Topology, error) {
	if paths < 1 || paths > 9 {
		return nil, fmt.Errorf("new topology: %d paths: want 1..9", paths)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	p := namePrefix(os.Getpid(), int(topoSeq.Add(1)))
	t := &Topology{Prefix: p, Src: p + "s", Dst: p + "d", logf: logf}
	if err := t.build(paths); err != nil {
		if cerr := t.Close(); cerr != nil {
			logf("cleanup after failed build of %s: %v", p, cerr)
		}
		return nil, fmt.Errorf("build topology %s: %w", p, err)
	}
	logf("topology %s: %d path(s) up", p, paths)
	return t, nil
}

func (t *Topology) build(paths int) error {
	if err := createNS(t.Src, false); err != nil {
		return err
	}
	if err := createNS(t.Dst, false); err != nil {
		return err
	}
	for i := 0; i < paths; i++ {
		src, rtrSrc, dst, rtrDst := pathAddrs(i)
		p := &Path{
			Router:    fmt.Sprintf("%sr%d", t.Prefix, i),
			SrcDev:    fmt.Sprintf("%ss%d", t.Prefix, i),
			DstDev:    fmt.Sprintf("%sd%d", t.Prefix, i),
			RtrSrcDev: fmt.Sprintf("%sa%d", t.Prefix, i),
			RtrDstDev: fmt.Sprintf("%sb%d", t.Prefix, i),
			SrcAddr:   src,
			DstAddr:   dst,
		}
		p.TunUpName = fmt.Sprintf("%su%d", t.Prefix, i)
		p.TunDownName = fmt.Sprintf("%sw%d", t.Prefix, i)
		t.Paths = append(t.Paths, p)
		if err := createNS(p.Router, true); err != nil {
			return err
		}
		if err := t.buildPath(p, rtrSrc, rtrDst); err != nil {
			return fmt.Errorf("path %d: %w", i, err)
		}
	}
	return nil
}

func (t *Topology) buildPath(p *Path, rtrSrc, rtrDst netip.Addr) error {
	rh, closeR, err := handle(p.Router)
	if err != nil {
		return err
	}
	defer closeR()
	sh, closeS, err := handle(t.Src)
	if err != nil {
		return err
	}
	defer closeS()
	dh, closeD, err := handle(t.Dst)
	if err != nil {
		return err
	}
	defer closeD()

	if err := addVeth(rh, p.RtrSrcDev, p.SrcDev, t.Src); err != nil {
		return err
	}
	if err := addVeth(rh, p.RtrDstDev, p.DstDev, t.Dst); err != nil {
		return err
	}
	err = Do(p.Router, func() error {
		var err error
		if p.TunUp, err = openTun(p.TunUpName); err != nil {
			return err
		}
		p.TunDown, err = openTun(p.TunDownName)
		return err
	})
	if err != nil {
		return err
	}
	steps := []struct {
		h          *netlink.Handle
		dev        string
		addr       netip.Addr
		route      netip.Prefix // reached via gw
		gw         netip.Addr
		tunTable   int
		tunDevName string
	}{
		{h: sh, dev: p.SrcDev, addr: p.SrcAddr, route: netip.PrefixFrom(p.DstAddr, 24).Masked(), gw: rtrSrc},
		{h: dh, dev: p.DstDev, addr: p.DstAddr, route: netip.PrefixFrom(p.SrcAddr, 24).Masked(), gw: rtrDst},
		{h: rh, dev: p.RtrSrcDev, addr: rtrSrc, tunTable: tableUp, tunDevName: p.TunUpName},
		{h: rh, dev: p.RtrDstDev, addr: rtrDst, tunTable: tableDown, tunDevName: p.TunDownName},
	}
	for _, s := range steps {
		l, err := s.h.LinkByName(s.dev)
		if err != nil {
			return fmt.Errorf("find %s: %w", s.dev, err)
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: s.addr.AsSlice(), Mask: net.CIDRMask(24, 32)}}
		if err := s.h.AddrAdd(l, addr); err != nil {
			return fmt.Errorf("add address %s to %s: %w", s.addr, s.dev, err)
		}
		if err := s.h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", s.dev, err)
		}
		if s.route.IsValid() {
			r := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: s.gw.AsSlice(),
				Dst: &net.IPNet{IP: s.route.Addr().AsSlice(), Mask: net.CIDRMask(s.route.Bits(), 32)}}
			if err := s.h.RouteAdd(r); err != nil {
				return fmt.Errorf("add route %s via %s: %w", s.route, s.gw, err)
			}
		}
		if s.tunTable != 0 {
			tun, err := s.h.LinkByName(s.tunDevName)
			if err != nil {
				return fmt.Errorf("find %s: %w", s.tunDevName, err)
			}
			if err := s.h.LinkSetTxQLen(tun, 1000); err != nil {
				return fmt.Errorf("set txqueuelen of %s: %w", s.tunDevName, err)
			}
			if err := s.h.LinkSetUp(tun); err != nil {
				return fmt.Errorf("set %s up: %w", s.tunDevName, err)
			}
			r := &netlink.Route{LinkIndex: tun.Attrs().Index, Table: s.tunTable, Scope: netlink.SCOPE_LINK,
				Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}}
			if err := s.h.RouteAdd(r); err != nil {
				return fmt.Errorf("add default route via %s in table %d: %w", s.tunDevName, s.tunTable, err)
			}
			rule := netlink.NewRule()
			rule.IifName = s.dev
			rule.Table = s.tunTable
			rule.Priority = s.tunTable
			rule.Family = unix.AF_INET
			if err := s.h.RuleAdd(rule); err != nil {
				return fmt.Errorf("add rule iif %s lookup %d: %w", s.dev, s.tunTable, err)
			}
		}
	}
	// A veth's qdisc is attached only when the kernel's link watcher sees
	// the carrier come up, up to a second later; until then it drops every
	// packet (ARP included). Wait for it.
	for _, w := range []struct {
		h   *netlink.Handle
		dev string
	}{{sh, p.SrcDev}, {dh, p.DstDev}, {rh, p.RtrSrcDev}, {rh, p.RtrDstDev}} {
		if err := waitOperUp(w.h, w.dev, 3*time.Second); err != nil {
			return err
		}
	}
	for _, h := range []*netlink.Handle{sh, dh, rh} {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("find lo: %w", err)
		}
		if err := h.LinkSetUp(lo); err != nil {
			return fmt.Errorf("set lo up: %w", err)
		}
	}
	return nil
}

func waitOperUp(h *netlink.Handle, dev string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l, err := h.LinkByName(dev)
		if err != nil {
			return fmt.Errorf("find %s: %w", dev, err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("link %s not up after %v (state %v)", dev, timeout, l.Attrs().OperState)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func addVeth(rh *netlink.Handle, name, peer, peerNS string) error {
	ns, err := vnetns.GetFromName(peerNS)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", peerNS, err)
	}
	defer ns.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: 1500}, PeerName: peer,
		PeerNamespace: netlink.NsFd(int(ns))}
	if err := rh.LinkAdd(v); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", name, peer, err)
	}
	return nil
}

func handle(ns string) (*netlink.Handle, func(), error) {
	nh, err := vnetns.GetFromName(ns)
	if err != nil {
		return nil, nil, fmt.Errorf("open namespace %s: %w", ns, err)
	}
	h, err := netlink.NewHandleAt(nh)
	if err != nil {
		nh.Close()
		return nil, nil, fmt.Errorf("netlink handle in %s: %w", ns, err)
	}
	return h, func() { h.Close(); nh.Close() }, nil
}

// createNS creates a named namespace and sets its sysctls: no IPv6 (no
// stray router solicitations through the emulator) and, for routers,
// forwarding on and reverse-path filtering off (packets from src come back
// into the kernel on a TUN device).
func createNS(name string, router bool) error {
	runtime.LockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("get current namespace: %w", err)
	}
	defer orig.Close()
	ns, err := vnetns.NewNamed(name)
	if err != nil {
		if rerr := vnetns.Set(orig); rerr == nil {
			runtime.UnlockOSThread()
		}
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	ns.Close()
	serr := setSysctls(router)
	if err := vnetns.Set(orig); err != nil {
		// Leave the thread locked: it dies with this goroutine.
		return fmt.Errorf("return from namespace %s: %w", name, err)
	}
	runtime.UnlockOSThread()
	if serr != nil {
		return fmt.Errorf("namespace %s: %w", name, serr)
	}
	return nil
}

func setSysctls(router bool) error {
	kv := [][2]string{
		{"net/ipv6/conf/all/disable_ipv6", "1"},
		{"net/ipv6/conf/default/disable_ipv6", "1"},
	}
	if router {
		kv = append(kv,
			[2]string{"net/ipv4/ip_forward", "1"},
			[2]string{"net/ipv4/conf/all/rp_filter", "0"},
			[2]string{"net/ipv4/conf/default/rp_filter", "0"},
			[2]string{"net/ipv4/conf/all/forwarding", "1"},
			[2]string{"net/ipv4/conf/default/forwarding", "1"},
		)
	}
	for _, p := range kv {
		if err := os.WriteFile("/proc/sys/"+p[0], []byte(p[1]), 0o644); err != nil {
			return fmt.Errorf("set sysctl %s: %w", p[0], err)
		}
	}
	return nil
}

func openTun(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %s: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("create tun %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "tun:"+name), nil
}

// Do runs fn on a goroutine-locked OS thread switched into the named
// namespace. Sockets and TUN devices opened in fn stay in that namespace
// and may be used from any goroutine afterwards.
func Do(ns string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("get current namespace: %w", err)
	}
	defer orig.Close()
	target, err := vnetns.GetFromName(ns)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open namespace %s: %w", ns, err)
	}
	defer target.Close()
	if err := vnetns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter namespace %s: %w", ns, err)
	}
	ferr := fn()
	if err := vnetns.Set(orig); err != nil {
		return fmt.Errorf("return from namespace %s: %w", ns, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Command returns a command that runs name with args in namespace ns.
// It enters only the network namespace (nsenter --net): unlike `ip netns
// exec`, which remounts /sys, the command sees the host's cgroup mounts,
// so that lanes can put it in a lane.
func Command(ctx context.Context, ns, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + filepath.Join(netnsDir, ns), "--", name}, args...)...)
}

// Namespaces lists every namespace of the topology, ends first.
func (t *Topology) Namespaces() []string {
	ns := []string{t.Src, t.Dst}
	for _, p := range t.Paths {
		ns = append(ns, p.Router)
	}
	return ns
}

// Close kills any process left in the topology's namespaces, closes the
// TUN devices and deletes the namespaces. It may be called more than once.
func (t *Topology) Close() error {
	var errs []error
	for _, p := range t.Paths {
		for _, f := range []**os.File{&p.TunUp, &p.TunDown} {
			if *f != nil {
				if err := (*f).Close(); err != nil {
					errs = append(errs, err)
				}
				*f = nil
			}
		}
	}
	for _, ns := range t.Namespaces() {
		if err := removeNS(ns, t.logf); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close topology %s: %w", t.Prefix, err)
	}
	return nil
}

const netnsDir = "/var/run/netns"

// removeNS kills the processes in the named namespace and deletes it.
// A namespace that does not exist is not an error.
func removeNS(name string, logf func(string, ...any)) error {
	path := filepath.Join(netnsDir, name)
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("stat namespace %s: %w", name, err)
	}
	pids, err := pidsInNetns(st.Ino)
	if err != nil {
		return fmt.Errorf("list processes of namespace %s: %w", name, err)
	}
	for _, pid := range pids {
		if pid == os.Getpid() {
			continue
		}
		logf("namespace %s: killing leftover process %d", name, pid)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill process %d in namespace %s: %w", pid, name, err)
		}
	}
	// A file left by a half-finished creation or deletion is not a mount
	// point any more: unmount what is mounted, then remove the file.
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount namespace %s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	return nil
}

// pidsInNetns lists the processes whose network namespace has inode ino.
func pidsInNetns(ino uint64) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	want := fmt.Sprintf("net:[%d]", ino)
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || fmt.Sprint(pid) != e.Name() {
			continue
		}
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			continue // gone, or a kernel thread
		}
		if strings.TrimSpace(link) == want {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

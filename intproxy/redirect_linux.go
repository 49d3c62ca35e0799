package intproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Redirect installs netfilter (nftables) rules in the caller's network
// namespace that redirect the TCP connections this host opens to the
// destinations of rules to the transparent listener on port (at
// 127.0.0.1 or ::1), except connections to the addresses in skip (the
// server end's, which the proxy's own paths reach). The rules are tables
// of their own, RedirectTable(port); tables of that name left by a proxy
// that crashed are replaced. The function it returns removes them.
func Redirect(port uint16, rules []Rule, skip []netip.AddrPort) (undo func() error, err error) {
	if len(rules) == 0 {
		return nil, errors.New("intproxy: nothing to redirect")
	}
	if port == 0 {
		return nil, errors.New("intproxy: redirect to port 0")
	}
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("intproxy: nftables: %w", err)
	}
	name := RedirectTable(port)
	fams := []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6}
	// Leftovers of a crashed proxy on this port go first.
	removeTables(c, name, fams)
	for _, fam := range fams {
		v4 := fam == nftables.TableFamilyIPv4
		var mine []Rule
		for _, r := range rules {
			if r.Prefix.Addr().Is4() == v4 {
				mine = append(mine, r)
			}
		}
		if len(mine) == 0 {
			continue
		}
		t := c.AddTable(&nftables.Table{Name: name, Family: fam})
		ch := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
		for _, s := range skip {
			if s.Addr().Unmap().Is4() != v4 {
				continue
			}
			ex := append(tcpTo(netip.PrefixFrom(s.Addr().Unmap(), s.Addr().Unmap().BitLen()), s.Port(), s.Port()), &expr.Verdict{Kind: expr.VerdictAccept})
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: ex})
		}
		for _, r := range mine {
			ex := append(tcpTo(r.Prefix, r.Lo, r.Hi),
				&expr.Immediate{Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
				&expr.Redir{RegisterProtoMin: 1})
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: ex})
		}
	}
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("intproxy: install the redirect rules (table %s): %w", name, err)
	}
	return func() error {
		c, err := nftables.New()
		if err != nil {
			return fmt.Errorf("intproxy: nftables: %w", err)
		}
		removeTables(c, name, fams)
		if err := c.Flush(); err != nil {
			return fmt.Errorf("intproxy: remove the redirect rules (table %s): %w", name, err)
		}
		return nil
	}, nil
}

// RemoveRedirect removes the redirect tables of port (a crashed proxy's).
func RemoveRedirect(port uint16) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("intproxy: nftables: %w", err)
	}
	removeTables(c, RedirectTable(port), []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6})
	return c.Flush()
}

// removeTables queues the removal of the tables that exist.
func removeTables(c *nftables.Conn, name string, fams []nftables.TableFamily) {
	for _, fam := range fams {
		if t, err := c.ListTableOfFamily(name, fam); err == nil && t != nil {
			c.DelTable(t)
		}
	}
}

// tcpTo matches TCP packets to prefix on ports lo..hi.
func tcpTo(p netip.Prefix, lo, hi uint16) []expr.Any {
	off, n := uint32(16), uint32(4) // IPv4 daddr
	if p.Addr().Is6() {
		off, n = 24, 16
	}
	mask := make([]byte, n)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Addr().AsSlice()},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: binary.BigEndian.AppendUint16(nil, lo), ToData: binary.BigEndian.AppendUint16(nil, hi)},
	}
}

// originalDst is the destination a redirected connection's program asked
// for (SO_ORIGINAL_DST, from the connection's NAT entry).
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errors.New("not a TCP connection")
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	local := addrPortOf(c.LocalAddr())
	var ap netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		var buf [28]byte // sockaddr_in6, the larger
		l := uint32(len(buf))
		level := unix.SOL_IP
		if !local.Addr().Unmap().Is4() {
			level = unix.SOL_IPV6
		}
		const soOriginalDst = 80 // SO_ORIGINAL_DST, IP6T_SO_ORIGINAL_DST
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, uintptr(level), soOriginalDst,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
		if e != 0 {
			serr = e
			return
		}
		port := binary.BigEndian.Uint16(buf[2:4])
		switch binary.NativeEndian.Uint16(buf[0:2]) {
		case unix.AF_INET:
			ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte(buf[4:8])), port)
		case unix.AF_INET6:
			ap = netip.AddrPortFrom(netip.AddrFrom16([16]byte(buf[8:24])).Unmap(), port)
		default:
			serr = fmt.Errorf("address family %d", binary.NativeEndian.Uint16(buf[0:2]))
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("the original destination (SO_ORIGINAL_DST): %w (was the connection redirected by a netfilter rule?)", err)
	}
	if ap == local {
		return netip.AddrPort{}, fmt.Errorf("the connection was not redirected: it was made to the proxy's own address %v", local)
	}
	return ap, nil
}

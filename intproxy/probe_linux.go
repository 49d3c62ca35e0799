package intproxy

import (
	"errors"
	"fmt"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/netprobe"
)

// The proxy's kernel mechanisms, probed as lanes probes its others: what
// each needs is tried on a throwaway object, and the fallback said.

// ProbeLaneLookup checks that sock_diag tells a TCP socket's cgroup
// (Linux 5.7 and later), on a loopback connection of its own.
func ProbeLaneLookup() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("loopback listener: %w", err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return fmt.Errorf("loopback connection: %w", err)
	}
	defer c.Close()
	if _, err := SocketCgroup("", addrPortOf(c.LocalAddr()), addrPortOf(c.RemoteAddr())); err != nil {
		return fmt.Errorf("%w: %v", features.ErrNotSupported, err)
	}
	return nil
}

// ProbeRedirect checks that nftables takes a NAT chain on the output hook
// with a redirect rule, in a throwaway network namespace (the host's
// rules are not touched).
func ProbeRedirect() error {
	return netprobe.InThrowawayNetns(func(_ *netlink.Handle, ns vnetns.NsHandle) error {
		c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
		if err != nil {
			return fmt.Errorf("%w: nftables: %v", features.ErrNotSupported, err)
		}
		t := c.AddTable(&nftables.Table{Name: "lanes_proxy_probe", Family: nftables.TableFamilyIPv4})
		ch := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
		p, _ := ParseRule("192.0.2.0/24:80")
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(tcpTo(p.Prefix, p.Lo, p.Hi),
			&expr.Immediate{Register: 1, Data: []byte{0x1f, 0x90}}, &expr.Redir{RegisterProtoMin: 1})})
		if err := c.Flush(); err != nil {
			return fmt.Errorf("%w: an nftables NAT redirect rule (CONFIG_NF_TABLES, CONFIG_NFT_NAT, CONFIG_NFT_REDIR): %v", features.ErrNotSupported, err)
		}
		return nil
	})
}

// Mechanisms are the proxy's mechanisms and their fallbacks, probed.
func Mechanisms() []features.Mechanism {
	var ms []features.Mechanism
	if err := ProbeLaneLookup(); err == nil {
		ms = append(ms, features.Mechanism{Resource: "proxy labels", Backend: "the lane of a connection's socket: its cgroup v2 id (sock_diag) among lanes' groups", Preferred: true, Reason: "probed: sock_diag tells a socket's cgroup", OK: true})
	} else {
		ms = append(ms, features.Mechanism{Resource: "proxy labels", Backend: "none: every connection gets lanes proxy client's --default label", Reason: err.Error(), OK: true})
	}
	if err := ProbeRedirect(); err == nil {
		ms = append(ms, features.Mechanism{Resource: "proxy transparent mode", Backend: "nftables NAT redirect (output hook) + SO_ORIGINAL_DST", Preferred: true, Reason: "probed: an nftables NAT chain", OK: true})
	} else {
		why := err.Error()
		if !errors.Is(err, features.ErrNotSupported) {
			why = "probe failed: " + why
		}
		ms = append(ms, features.Mechanism{Resource: "proxy transparent mode", Backend: "none: SOCKS5 only (--redirect refused)", Reason: why, OK: true})
	}
	return ms
}

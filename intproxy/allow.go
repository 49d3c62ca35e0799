package intproxy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is one entry of the server end's allow-list: destinations in Prefix
// on ports Lo..Hi.
type Rule struct {
	Prefix netip.Prefix
	Lo, Hi uint16
}

// ParseRule reads an allow-list entry: an address or prefix, with a port
// or port range after a colon ("198.18.2.0/24", "198.18.2.1:80",
// "198.18.2.0/24:8000-8100", "[2001:db8::/32]:443"). Without a port every
// port is allowed.
func ParseRule(s string) (Rule, error) {
	in := strings.TrimSpace(s)
	addr, ports := in, ""
	if strings.HasPrefix(in, "[") {
		end := strings.IndexByte(in, ']')
		if end < 0 {
			return Rule{}, fmt.Errorf("allow %q: no closing ]", s)
		}
		addr, ports = in[1:end], in[end+1:]
		if ports != "" {
			p, ok := strings.CutPrefix(ports, ":")
			if !ok || p == "" {
				return Rule{}, fmt.Errorf("allow %q: want [ADDRESS/BITS]:PORT", s)
			}
			ports = p
		}
	} else if i := strings.LastIndexByte(in, ':'); i >= 0 && strings.Count(in, ":") == 1 {
		// One colon: IPv4 and a port (an IPv6 prefix with a port is
		// written in brackets).
		addr, ports = in[:i], in[i+1:]
		if ports == "" {
			return Rule{}, fmt.Errorf("allow %q: an empty port", s)
		}
	}
	r := Rule{Lo: 1, Hi: 65535}
	var err error
	if strings.Contains(addr, "/") {
		r.Prefix, err = netip.ParsePrefix(addr)
	} else {
		var a netip.Addr
		a, err = netip.ParseAddr(addr)
		if err == nil {
			r.Prefix = netip.PrefixFrom(a, a.BitLen())
		}
	}
	if err != nil {
		return Rule{}, fmt.Errorf("allow %q: %q is not an address or prefix", s, addr)
	}
	r.Prefix = r.Prefix.Masked()
	if r.Prefix.Addr().Zone() != "" {
		return Rule{}, fmt.Errorf("allow %q: a zone is not allowed", s)
	}
	if ports != "" {
		lo, hi, isRange := strings.Cut(ports, "-")
		if r.Lo, err = parsePort(lo); err == nil {
			r.Hi = r.Lo
			if isRange {
				r.Hi, err = parsePort(hi)
			}
		}
		if err != nil {
			return Rule{}, fmt.Errorf("allow %q: %v", s, err)
		}
		if r.Hi < r.Lo {
			return Rule{}, fmt.Errorf("allow %q: the range %d-%d is empty", s, r.Lo, r.Hi)
		}
	}
	return r, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q: want 1..65535", s)
	}
	return uint16(n), nil
}

func (r Rule) String() string {
	p := r.Prefix.String()
	if r.Prefix.Addr().Is6() {
		p = "[" + p + "]"
	}
	switch {
	case r.Lo == 1 && r.Hi == 65535:
		return r.Prefix.String()
	case r.Lo == r.Hi:
		return p + ":" + strconv.Itoa(int(r.Lo))
	}
	return p + ":" + strconv.Itoa(int(r.Lo)) + "-" + strconv.Itoa(int(r.Hi))
}

// Allows says whether the rule covers ap.
func (r Rule) Allows(ap netip.AddrPort) bool {
	return r.Prefix.Contains(ap.Addr().Unmap()) && ap.Port() >= r.Lo && ap.Port() <= r.Hi
}

// allowed says whether any rule covers ap.
func allowed(rules []Rule, ap netip.AddrPort) bool {
	for _, r := range rules {
		if r.Allows(ap) {
			return true
		}
	}
	return false
}

// RedirectTable is the name of the nftables tables (ip and ip6) of the
// transparent listener on a port (Redirect).
func RedirectTable(port uint16) string { return "lanes_proxy_" + strconv.Itoa(int(port)) }

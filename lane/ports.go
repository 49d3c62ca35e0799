package lane

import (
	"fmt"
	"strconv"
	"strings"
)

// Transport protocols a port rule may name.
const (
	ProtoTCP = "tcp"
	ProtoUDP = "udp"
)

// PortRule is one entry of a lane's net.ports: the TCP and UDP ports Lo..Hi
// (a single port has Lo == Hi), or only those of Proto. A packet matches
// when its source or its destination port is in the range: on a server the
// service port is the local port of every packet, on a client it is the
// remote one. netsched uses port rules only where it cannot classify
// packets by their socket's lane (no BPF).
type PortRule struct {
	Proto string // ProtoTCP, ProtoUDP, or "" for both
	Lo    uint16 // 1..65535
	Hi    uint16 // Lo..65535
}

// String writes the rule as the config file does: "5201", "6000-6100",
// "tcp/5201", "udp/4000-4010".
func (r PortRule) String() string {
	var b strings.Builder
	if r.Proto != "" {
		b.WriteString(r.Proto)
		b.WriteByte('/')
	}
	b.WriteString(strconv.Itoa(int(r.Lo)))
	if r.Hi != r.Lo {
		b.WriteByte('-')
		b.WriteString(strconv.Itoa(int(r.Hi)))
	}
	return b.String()
}

// MarshalText writes the rule as String does.
func (r PortRule) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses the rule as ParsePortRule does.
func (r *PortRule) UnmarshalText(b []byte) error {
	p, err := ParsePortRule(string(b))
	if err != nil {
		return err
	}
	*r = p
	return nil
}

// Protos returns the protocols the rule covers.
func (r PortRule) Protos() []string {
	if r.Proto == "" {
		return []string{ProtoTCP, ProtoUDP}
	}
	return []string{r.Proto}
}

// Overlaps says whether a packet could match both rules: their protocols
// and their port ranges intersect.
func (r PortRule) Overlaps(o PortRule) bool {
	if r.Proto != "" && o.Proto != "" && r.Proto != o.Proto {
		return false
	}
	return r.Lo <= o.Hi && o.Lo <= r.Hi
}

// ParsePortRule parses one net.ports entry written as a string: a port
// ("5201"), a range ("6000-6100"), either optionally after a protocol and
// a slash ("tcp/5201", "udp/4000-4010"). Ports are 1..65535; a range's
// start is at most its end; the protocol is tcp or udp (any case).
func ParsePortRule(s string) (PortRule, error) {
	var r PortRule
	spec := strings.TrimSpace(s)
	if proto, rest, ok := strings.Cut(spec, "/"); ok {
		switch p := strings.ToLower(strings.TrimSpace(proto)); p {
		case ProtoTCP, ProtoUDP:
			r.Proto = p
		default:
			return PortRule{}, fmt.Errorf("%q: unknown protocol %q (want tcp or udp)", s, proto)
		}
		spec = strings.TrimSpace(rest)
	}
	lo, hi, isRange := strings.Cut(spec, "-")
	var err error
	if r.Lo, err = parsePort(s, lo); err != nil {
		return PortRule{}, err
	}
	r.Hi = r.Lo
	if isRange {
		if r.Hi, err = parsePort(s, hi); err != nil {
			return PortRule{}, err
		}
		if r.Lo > r.Hi {
			return PortRule{}, fmt.Errorf("%q: range start %d is above its end %d", s, r.Lo, r.Hi)
		}
	}
	return r, nil
}

// parsePort parses one port number of entry s.
func parsePort(s, field string) (uint16, error) {
	field = strings.TrimSpace(field)
	if field == "" || strings.Trim(field, "0123456789") != "" {
		return 0, fmt.Errorf("%q: want a port (5201), a range (\"6000-6100\"), optionally after tcp/ or udp/", s)
	}
	n, err := strconv.ParseUint(field, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%q: port %s is outside 1..65535", s, field)
	}
	return uint16(n), nil
}

// portRuleOf turns one decoded TOML array element into a rule: an integer
// port or a string ParsePortRule accepts.
func portRuleOf(v any) (PortRule, error) {
	switch v := v.(type) {
	case int64:
		if v < 1 || v > 65535 {
			return PortRule{}, fmt.Errorf("port %d is outside 1..65535", v)
		}
		return PortRule{Lo: uint16(v), Hi: uint16(v)}, nil
	case string:
		return ParsePortRule(v)
	default:
		return PortRule{}, fmt.Errorf("got %s, want a port number or a string such as \"tcp/6000-6100\"", tomlValueType(v))
	}
}

// tomlValueType names the TOML type go-toml decoded into v.
func tomlValueType(v any) string {
	switch v.(type) {
	case bool:
		return "boolean"
	case float64:
		return "float"
	case []any:
		return "array"
	case map[string]any:
		return "table"
	default:
		return "date or time"
	}
}

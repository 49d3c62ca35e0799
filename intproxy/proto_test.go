package intproxy

import (
	"bytes"
	"io"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/intnw"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range []msg{
		{kind: kOpen, stream: 1, label: intnw.BGLarge, dest: Dest{Addr: netip.MustParseAddr("198.18.20.1"), Port: 80}},
		{kind: kOpen, stream: 7, label: intnw.FGSmall, dest: Dest{Addr: netip.MustParseAddr("2001:db8::1"), Port: 443}},
		{kind: kOpen, stream: 1 << 31, label: intnw.FGLarge, dest: Dest{Host: "mail.example", Port: 993}},
		{kind: kOpened, stream: 3},
		{kind: kRefused, stream: 3, code: repNotAllowed, text: "198.18.30.1:22 is outside the allowed destinations"},
		{kind: kData, stream: 9, data: []byte("hello")},
		{kind: kFin, stream: 9},
		{kind: kReset, stream: 9, text: "connection reset by peer"},
		{kind: kReset, stream: 9},
	} {
		t.Run(m.kind.String(), func(t *testing.T) {
			got, err := parseMsg(m.encode())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, m) {
				t.Errorf("parse(encode(%+v)) = %+v", m, *got)
			}
		})
	}
}

// Messages that do not parse: each is refused with an error naming what
// is wrong (the session then ends the multi-socket).
func TestBadMessages(t *testing.T) {
	v4 := []byte{atypIPv4, 198, 18, 20, 1, 0, 80}
	open := func(label byte, dest []byte) []byte { return append([]byte{byte(kOpen), 0, 0, 0, 1, label}, dest...) }
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "0 bytes"},
		{"short header", []byte{byte(kData), 0, 0}, "3 bytes"},
		{"stream 0", []byte{byte(kFin), 0, 0, 0, 0}, "stream 0"},
		{"unknown kind", []byte{9, 0, 0, 0, 1}, "kind 9"},
		{"label out of range", open(4, v4), "label 4 out of range"},
		{"label 255", open(255, v4), "label 255 out of range"},
		{"open without label", []byte{byte(kOpen), 0, 0, 0, 1}, "no label"},
		{"bad address type", open(0, []byte{2, 1, 2, 3, 4, 0, 80}), "address type 2"},
		{"short IPv4", open(0, []byte{atypIPv4, 1, 2, 3}), "short IPv4"},
		{"short IPv6", open(0, []byte{atypIPv6, 1, 2, 3}), "short IPv6"},
		{"empty name", open(0, []byte{atypDomain, 0, 0, 80}), "empty name"},
		{"port 0", open(0, []byte{atypIPv4, 198, 18, 20, 1, 0, 0}), "port 0"},
		{"trailing bytes", open(0, append(v4, 1)), "1 bytes after"},
		{"opened with body", []byte{byte(kOpened), 0, 0, 0, 1, 5}, "want none"},
		{"refused without code", []byte{byte(kRefused), 0, 0, 0, 1}, "no reply code"},
		{"refused as success", []byte{byte(kRefused), 0, 0, 0, 1, 0}, "code of success"},
		{"empty data", []byte{byte(kData), 0, 0, 0, 1}, "no bytes"},
		{"long reset", append([]byte{byte(kReset), 0, 0, 0, 1}, bytes.Repeat([]byte("x"), maxReason+1)...), "at most 512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parseMsg(tc.b)
			if err == nil {
				t.Fatalf("parsed: %+v", m)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// FuzzParseMsg: no input panics, and what parses encodes to the same bytes.
func FuzzParseMsg(f *testing.F) {
	for _, m := range []msg{
		{kind: kOpen, stream: 1, label: intnw.BGLarge, dest: Dest{Addr: netip.MustParseAddr("198.18.20.1"), Port: 80}},
		{kind: kOpen, stream: 2, dest: Dest{Host: "a.example", Port: 1}},
		{kind: kRefused, stream: 3, code: 2, text: "no"},
		{kind: kData, stream: 4, data: []byte{1, 2, 3}},
		{kind: kFin, stream: 5},
	} {
		f.Add(m.encode())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMsg(b)
		if err != nil {
			return
		}
		if got := m.encode(); !bytes.Equal(got, b) {
			// IPv4-mapped IPv6 destinations come back as IPv4.
			if m.kind == kOpen && len(b) > 6 && b[6] == atypIPv6 && m.dest.Addr.Is4() {
				return
			}
			t.Fatalf("encode(parse(%x)) = %x", b, got)
		}
	})
}

func TestParseRule(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		in      string
		want    string
		allows  []netip.AddrPort
		refuses []netip.AddrPort
	}{
		{in: "198.18.20.0/24", want: "198.18.20.0/24", allows: []netip.AddrPort{ap("198.18.20.9:1"), ap("198.18.20.255:65535")}, refuses: []netip.AddrPort{ap("198.18.21.1:80")}},
		{in: "198.18.20.1:80", want: "198.18.20.1/32:80", allows: []netip.AddrPort{ap("198.18.20.1:80")}, refuses: []netip.AddrPort{ap("198.18.20.1:81"), ap("198.18.20.2:80")}},
		{in: " 198.18.20.7/24:8000-8100 ", want: "198.18.20.0/24:8000-8100", allows: []netip.AddrPort{ap("198.18.20.1:8000"), ap("198.18.20.1:8100")}, refuses: []netip.AddrPort{ap("198.18.20.1:7999"), ap("198.18.20.1:8101")}},
		{in: "[2001:db8::/32]:443", want: "[2001:db8::/32]:443", allows: []netip.AddrPort{ap("[2001:db8:1::5]:443")}, refuses: []netip.AddrPort{ap("[2001:db9::1]:443")}},
		{in: "2001:db8::/32", want: "2001:db8::/32", allows: []netip.AddrPort{ap("[2001:db8::1]:1")}},
		{in: "0.0.0.0/0", want: "0.0.0.0/0", allows: []netip.AddrPort{ap("198.18.0.1:22")}, refuses: []netip.AddrPort{ap("[::1]:22")}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			r, err := ParseRule(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if r.String() != tc.want {
				t.Errorf("String() = %q, want %q", r, tc.want)
			}
			for _, a := range tc.allows {
				if !r.Allows(a) {
					t.Errorf("%v does not allow %v", r, a)
				}
			}
			for _, a := range tc.refuses {
				if r.Allows(a) {
					t.Errorf("%v allows %v", r, a)
				}
			}
		})
	}
	for _, bad := range []string{"", "example.com", "198.18.20.0/33", "198.18.20.1:", "198.18.20.1:0", "198.18.20.1:70000",
		"198.18.20.1:90-80", "2001:db8::/129", "[2001:db8::1", "[2001:db8::1]443", "198.18.20.1:x"} {
		if r, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) = %v, want an error", bad, r)
		}
	}
}

// socksExchange runs socksAccept on what a client sends (req) and returns
// what the client end answered and the destination or error.
func socksExchange(req []byte) ([]byte, Dest, error) {
	var reply bytes.Buffer
	rw := struct {
		io.Reader
		io.Writer
	}{bytes.NewReader(req), &reply}
	d, err := socksAccept(rw)
	return reply.Bytes(), d, err
}

func TestSOCKSAccept(t *testing.T) {
	greet := []byte{5, 1, 0}
	req := func(cmd, atyp byte, rest ...byte) []byte {
		return append(append(append([]byte{}, greet...), 5, cmd, 0, atyp), rest...)
	}
	for _, tc := range []struct {
		name    string
		in      []byte
		want    Dest
		reply   []byte // what the client end answered
		errWith string
	}{
		{name: "ipv4", in: req(1, 1, 198, 18, 20, 1, 0x1f, 0x90), want: Dest{Addr: netip.MustParseAddr("198.18.20.1"), Port: 8080}, reply: []byte{5, 0}},
		{name: "name", in: req(1, 3, 4, 'm', 'a', 'i', 'l', 0, 25), want: Dest{Host: "mail", Port: 25}, reply: []byte{5, 0}},
		{name: "ipv6", in: req(1, 4, append(netip.MustParseAddr("2001:db8::1").AsSlice(), 1, 187)...), want: Dest{Addr: netip.MustParseAddr("2001:db8::1"), Port: 443}, reply: []byte{5, 0}},
		{name: "socks4", in: []byte{4, 1, 0, 80, 198, 18, 20, 1, 0}, errWith: "version 4"},
		{name: "auth only", in: []byte{5, 1, 2}, reply: []byte{5, 0xff}, errWith: "not 0"},
		{name: "bind", in: req(2, 1, 198, 18, 20, 1, 0, 80), reply: []byte{5, 0, 5, repCmdNotSupported, 0, 1, 0, 0, 0, 0, 0, 0}, errWith: "only CONNECT"},
		{name: "udp associate", in: req(3, 1, 0, 0, 0, 0, 0, 0), reply: []byte{5, 0, 5, repCmdNotSupported, 0, 1, 0, 0, 0, 0, 0, 0}, errWith: "only CONNECT"},
		{name: "address type 9", in: req(1, 9, 1, 2, 3, 4, 0, 80), reply: []byte{5, 0, 5, repAddrTypeNotSupport, 0, 1, 0, 0, 0, 0, 0, 0}, errWith: "address type 9"},
		{name: "port 0", in: req(1, 1, 198, 18, 20, 1, 0, 0), reply: []byte{5, 0, 5, repAddrTypeNotSupport, 0, 1, 0, 0, 0, 0, 0, 0}, errWith: "port 0"},
		{name: "cut short", in: req(1, 1, 198, 18), reply: []byte{5, 0}, errWith: "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, d, err := socksExchange(tc.in)
			if tc.errWith != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errWith) {
					t.Errorf("error %v, want one saying %q", err, tc.errWith)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if d != tc.want {
				t.Errorf("destination %+v, want %+v", d, tc.want)
			}
			if !bytes.Equal(reply, tc.reply) {
				t.Errorf("answered % x, want % x", reply, tc.reply)
			}
		})
	}
}

package intproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/lanes-qos/lanes/intnw"
)

// kind is what a message of the proxy protocol says. Every message is the
// payload of one IROB: a kind byte, the stream id (4 bytes, big endian),
// then the kind's body.
type kind uint8

const (
	// kOpen (client to server): open a stream to a destination. Body: the
	// label of the stream's replies (1 byte), the destination's type
	// (1 byte: atypIPv4, atypDomain or atypIPv6), its address (4 bytes, a
	// length byte and 1..255 bytes of name, or 16 bytes) and port (2 bytes).
	kOpen kind = 1 + iota
	// kOpened (server to client): the destination accepted. No body.
	kOpened
	// kRefused (server to client): the stream was not opened. Body: a
	// SOCKS5 reply code (1 byte) and the reason in text.
	kRefused
	// kData: bytes of the stream (at least one).
	kData
	// kFin: the sender will send no more bytes on the stream (its reader
	// saw EOF); the receiver half-closes its side.
	kFin
	// kReset: the stream is over; the receiver closes its side at once.
	// Body: the reason in text.
	kReset
)

func (k kind) String() string {
	switch k {
	case kOpen:
		return "open"
	case kOpened:
		return "opened"
	case kRefused:
		return "refused"
	case kData:
		return "data"
	case kFin:
		return "fin"
	case kReset:
		return "reset"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Destination address types (SOCKS5's ATYP values).
const (
	atypIPv4   = 1
	atypDomain = 3
	atypIPv6   = 4
)

// SOCKS5 reply codes, also the code of a kRefused message.
const (
	repSucceeded          = 0x00
	repFailure            = 0x01
	repNotAllowed         = 0x02
	repNetUnreachable     = 0x03
	repHostUnreachable    = 0x04
	repRefused            = 0x05
	repTTLExpired         = 0x06
	repCmdNotSupported    = 0x07
	repAddrTypeNotSupport = 0x08
)

const (
	headerLen = 5
	// maxReason bounds the text of a refusal or reset.
	maxReason = 512
)

// Dest is a stream's destination: an address or a name, and a port.
type Dest struct {
	Addr netip.Addr // valid unless Host is set
	Host string     // a name the server resolves
	Port uint16
}

func (d Dest) String() string {
	if d.Host != "" {
		return d.Host + ":" + strconv.Itoa(int(d.Port))
	}
	return netip.AddrPortFrom(d.Addr, d.Port).String()
}

// check says what is wrong with d as a destination.
func (d Dest) check() error {
	switch {
	case d.Port == 0:
		return errors.New("port 0")
	case d.Host != "" && d.Addr.IsValid():
		return errors.New("both a name and an address")
	case d.Host == "" && !d.Addr.IsValid():
		return errors.New("no address")
	case len(d.Host) > 255:
		return fmt.Errorf("a name of %d bytes, at most 255", len(d.Host))
	}
	return nil
}

// msg is one message of the proxy protocol.
type msg struct {
	kind   kind
	stream uint32
	label  intnw.Label // kOpen: the replies' label
	dest   Dest        // kOpen
	code   byte        // kRefused
	text   string      // kRefused, kReset
	data   []byte      // kData
}

// appendDest adds d in SOCKS5's form (type, address, port).
func appendDest(b []byte, d Dest) []byte {
	switch {
	case d.Host != "":
		b = append(b, atypDomain, byte(len(d.Host)))
		b = append(b, d.Host...)
	case d.Addr.Is4():
		a := d.Addr.As4()
		b = append(append(b, atypIPv4), a[:]...)
	default:
		a := d.Addr.As16()
		b = append(append(b, atypIPv6), a[:]...)
	}
	return binary.BigEndian.AppendUint16(b, d.Port)
}

// parseDest reads a destination in SOCKS5's form; n is the bytes it used.
func parseDest(b []byte) (d Dest, n int, err error) {
	if len(b) < 1 {
		return d, 0, errors.New("no address type")
	}
	switch b[0] {
	case atypIPv4:
		if len(b) < 1+4+2 {
			return d, 0, errors.New("short IPv4 destination")
		}
		d.Addr = netip.AddrFrom4([4]byte(b[1:5]))
		n = 5
	case atypIPv6:
		if len(b) < 1+16+2 {
			return d, 0, errors.New("short IPv6 destination")
		}
		d.Addr = netip.AddrFrom16([16]byte(b[1:17])).Unmap()
		n = 17
	case atypDomain:
		if len(b) < 2 || b[1] == 0 || len(b) < 2+int(b[1])+2 {
			return d, 0, errors.New("short or empty name")
		}
		d.Host = string(b[2 : 2+int(b[1])])
		n = 2 + int(b[1])
	default:
		return d, 0, fmt.Errorf("address type %d (want 1, 3 or 4)", b[0])
	}
	d.Port = binary.BigEndian.Uint16(b[n:])
	if err := d.check(); err != nil {
		return Dest{}, 0, err
	}
	return d, n + 2, nil
}

// encode returns m as an IROB's payload.
func (m *msg) encode() []byte {
	b := make([]byte, 0, headerLen+len(m.data)+len(m.text)+32)
	b = append(b, byte(m.kind))
	b = binary.BigEndian.AppendUint32(b, m.stream)
	switch m.kind {
	case kOpen:
		b = append(b, byte(m.label))
		b = appendDest(b, m.dest)
	case kRefused:
		b = append(b, m.code)
		b = append(b, truncate(m.text)...)
	case kReset:
		b = append(b, truncate(m.text)...)
	case kData:
		b = append(b, m.data...)
	}
	return b
}

func truncate(s string) string {
	if len(s) > maxReason {
		return s[:maxReason]
	}
	return s
}

// parseMsg reads one message; data aliases b.
func parseMsg(b []byte) (*msg, error) {
	if len(b) < headerLen {
		return nil, fmt.Errorf("intproxy: a message of %d bytes, at least %d", len(b), headerLen)
	}
	m := &msg{kind: kind(b[0]), stream: binary.BigEndian.Uint32(b[1:5])}
	body := b[headerLen:]
	bad := func(format string, a ...any) (*msg, error) {
		return nil, fmt.Errorf("intproxy: %v message of stream %d: %s", m.kind, m.stream, fmt.Sprintf(format, a...))
	}
	if m.stream == 0 {
		return bad("stream 0")
	}
	switch m.kind {
	case kOpen:
		if len(body) < 1 {
			return bad("no label")
		}
		m.label = intnw.Label(body[0])
		if !m.label.Valid() {
			return bad("label %d out of range (0..3)", body[0])
		}
		d, n, err := parseDest(body[1:])
		if err != nil {
			return bad("destination: %v", err)
		}
		if 1+n != len(body) {
			return bad("%d bytes after the destination", len(body)-1-n)
		}
		m.dest = d
	case kOpened, kFin:
		if len(body) != 0 {
			return bad("%d bytes of body, want none", len(body))
		}
	case kRefused:
		if len(body) < 1 {
			return bad("no reply code")
		}
		if len(body)-1 > maxReason {
			return bad("a reason of %d bytes, at most %d", len(body)-1, maxReason)
		}
		m.code, m.text = body[0], string(body[1:])
		if m.code == repSucceeded {
			return bad("refused with the code of success")
		}
	case kReset:
		if len(body) > maxReason {
			return bad("a reason of %d bytes, at most %d", len(body), maxReason)
		}
		m.text = string(body)
	case kData:
		if len(body) == 0 {
			return bad("no bytes")
		}
		m.data = body
	default:
		return nil, fmt.Errorf("intproxy: message kind %d (want 1..6)", b[0])
	}
	return m, nil
}

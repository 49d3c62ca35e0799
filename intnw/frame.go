package intnw

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The wire format: every frame is a 32-byte header and a payload.
//
//	0  u8  version (1)
//	1  u8  type
//	2  u8  label (data)
//	3  u8  flags (data)
//	4  u32 payload length
//	8  u64 IROB id (data), send time (ping, pong)
//	16 u64 offset of the chunk in its IROB (data)
//	24 u32 count: dependencies (data), acknowledgements (ack)
//	28 u32 path index (hello, pathdown), nonce (ping, pong)
//
// A data frame's payload is its dependencies (u64 each, in the chunk at
// offset 0 only) and then its bytes; an ack's is its entries (id u64,
// offset u64, length u32); a hello's the 16-byte session id; an error's
// or a close's a reason in text; a probe's is padding, discarded.
const (
	headerLen = 32
	version   = 1

	// MaxChunk bounds one data frame's bytes.
	MaxChunk = 1 << 20
	// MaxDeps bounds the dependencies one IROB may name.
	MaxDeps = 1024
	// maxAcks bounds one ack frame's entries.
	maxAcks = 4096
	ackLen  = 20
	// maxText bounds an error's or a close's reason.
	maxText = 1024
	// maxProbe bounds a probe's padding.
	maxProbe = 256 << 10
)

type frameType uint8

const (
	tHello    frameType = 1 + iota // client → server: join or open a session on path Aux
	tWelcome                       // server → client: the hello is accepted
	tData                          // a chunk of an IROB
	tAck                           // chunks received
	tPing                          // asks for a pong
	tPong                          // answers a ping
	tPathDown                      // the sender has lost path Aux
	tClose                         // the sender ends the session: nothing more will come
	tError                         // the sender refuses the session (hello) or the stream
	tProbe                         // padding the sender measures the path's bandwidth with
	numTypes
)

func (t frameType) String() string {
	names := [...]string{"", "hello", "welcome", "data", "ack", "ping", "pong", "pathdown", "close", "error", "probe"}
	if int(t) < len(names) && t > 0 {
		return names[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Data frame flags.
const (
	flagEnd    = 1 << 0 // the chunk ends its IROB
	flagDepAll = 1 << 1 // the IROB depends on every IROB of a lower id
	flagsKnown = flagEnd | flagDepAll
)

// frame is one decoded frame.
type frame struct {
	typ    frameType
	label  Label
	flags  uint8
	id     uint64 // IROB id; ping/pong: send time
	off    uint64
	count  uint32
	aux    uint32
	deps   []uint64
	data   []byte // data bytes; hello: session id; error/close: text
	acks   []ackEntry
	wireSz int // bytes on the wire, header included
}

// ackEntry acknowledges Len bytes of IROB ID from Off.
type ackEntry struct {
	ID  uint64
	Off uint64
	Len uint32
}

// ProtocolError is a frame the peer should never have sent.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "intnw: protocol error: " + e.Msg }

func protoErr(format string, a ...any) error { return &ProtocolError{Msg: fmt.Sprintf(format, a...)} }

// appendFrame appends f's wire form to b.
func appendFrame(b []byte, f *frame) []byte {
	var payload int
	switch f.typ {
	case tData:
		payload = 8*len(f.deps) + len(f.data)
		f.count = uint32(len(f.deps))
	case tAck:
		payload = ackLen * len(f.acks)
		f.count = uint32(len(f.acks))
	default:
		payload = len(f.data)
	}
	var h [headerLen]byte
	h[0] = version
	h[1] = byte(f.typ)
	h[2] = byte(f.label)
	h[3] = f.flags
	binary.BigEndian.PutUint32(h[4:], uint32(payload))
	binary.BigEndian.PutUint64(h[8:], f.id)
	binary.BigEndian.PutUint64(h[16:], f.off)
	binary.BigEndian.PutUint32(h[24:], f.count)
	binary.BigEndian.PutUint32(h[28:], f.aux)
	b = append(b, h[:]...)
	switch f.typ {
	case tData:
		for _, d := range f.deps {
			b = binary.BigEndian.AppendUint64(b, d)
		}
		b = append(b, f.data...)
	case tAck:
		for _, a := range f.acks {
			b = binary.BigEndian.AppendUint64(b, a.ID)
			b = binary.BigEndian.AppendUint64(b, a.Off)
			b = binary.BigEndian.AppendUint32(b, a.Len)
		}
	default:
		b = append(b, f.data...)
	}
	return b
}

// readFrame reads and checks one frame. An error other than io.EOF (the
// stream ended between frames) is the stream's failure or a
// *ProtocolError.
func readFrame(r io.Reader) (*frame, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, protoErr("stream ended inside a frame header")
		}
		return nil, err
	}
	f, payload, err := parseHeader(h[:])
	if err != nil {
		return nil, err
	}
	buf := make([]byte, payload)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, protoErr("stream ended inside a %s frame", f.typ)
		}
		return nil, err
	}
	if err := f.parsePayload(buf); err != nil {
		return nil, err
	}
	return f, nil
}

// parseHeader checks a header and returns its frame and payload length.
func parseHeader(h []byte) (*frame, int, error) {
	if h[0] != version {
		return nil, 0, protoErr("version %d, want %d", h[0], version)
	}
	f := &frame{typ: frameType(h[1]), label: Label(h[2]), flags: h[3],
		id: binary.BigEndian.Uint64(h[8:]), off: binary.BigEndian.Uint64(h[16:]),
		count: binary.BigEndian.Uint32(h[24:]), aux: binary.BigEndian.Uint32(h[28:])}
	payload := int(binary.BigEndian.Uint32(h[4:]))
	f.wireSz = headerLen + payload
	switch f.typ {
	case tData:
		switch {
		case !f.label.Valid():
			return nil, 0, protoErr("IROB %d: %v is not a label", f.id, f.label)
		case f.flags&^flagsKnown != 0:
			return nil, 0, protoErr("IROB %d: unknown flags %#x", f.id, f.flags)
		case f.id == 0:
			return nil, 0, protoErr("IROB id 0")
		case f.count > MaxDeps:
			return nil, 0, protoErr("IROB %d: %d dependencies, at most %d", f.id, f.count, MaxDeps)
		case f.count > 0 && f.off != 0:
			return nil, 0, protoErr("IROB %d: dependencies in a chunk at offset %d (only the first chunk names them)", f.id, f.off)
		case payload < 8*int(f.count) || payload-8*int(f.count) > MaxChunk:
			return nil, 0, protoErr("IROB %d: payload of %d bytes for %d dependencies (at most %d bytes of data)", f.id, payload, f.count, MaxChunk)
		case f.off > 1<<62:
			return nil, 0, protoErr("IROB %d: offset %d", f.id, f.off)
		}
	case tAck:
		if f.count > maxAcks || payload != ackLen*int(f.count) {
			return nil, 0, protoErr("ack of %d entries in %d bytes", f.count, payload)
		}
	case tHello:
		if payload != 16 {
			return nil, 0, protoErr("hello with a %d-byte session id, want 16", payload)
		}
	case tWelcome, tPing, tPong, tPathDown:
		if payload != 0 {
			return nil, 0, protoErr("%s frame with %d bytes of payload", f.typ, payload)
		}
	case tClose, tError:
		if payload > maxText {
			return nil, 0, protoErr("%s reason of %d bytes, at most %d", f.typ, payload, maxText)
		}
	case tProbe:
		if payload > maxProbe {
			return nil, 0, protoErr("probe of %d bytes, at most %d", payload, maxProbe)
		}
	default:
		return nil, 0, protoErr("unknown frame type %d", h[1])
	}
	return f, payload, nil
}

func (f *frame) parsePayload(b []byte) error {
	switch f.typ {
	case tData:
		f.deps = make([]uint64, f.count)
		for i := range f.deps {
			d := binary.BigEndian.Uint64(b[8*i:])
			if d == 0 || d >= f.id {
				return protoErr("IROB %d depends on IROB %d: only on earlier ones", f.id, d)
			}
			f.deps[i] = d
		}
		f.data = b[8*f.count:]
	case tAck:
		f.acks = make([]ackEntry, f.count)
		for i := range f.acks {
			e := b[ackLen*i:]
			f.acks[i] = ackEntry{ID: binary.BigEndian.Uint64(e), Off: binary.BigEndian.Uint64(e[8:]), Len: binary.BigEndian.Uint32(e[16:])}
		}
	default:
		f.data = b
	}
	return nil
}

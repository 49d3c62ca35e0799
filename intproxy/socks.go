package intproxy

import (
	"errors"
	"fmt"
	"io"
)

// SOCKS5 (RFC 1928) as the client end serves it: no authentication,
// CONNECT only.
const (
	socksVersion   = 5
	methodNone     = 0x00
	methodNoAccept = 0xff // "no acceptable methods"
	cmdConnect     = 1
)

// SOCKSError is a SOCKS5 request the client end refused: Reply is the code
// it answered with (0: none could be sent).
type SOCKSError struct {
	Reply byte
	Msg   string
}

func (e *SOCKSError) Error() string { return "socks5: " + e.Msg }

// socksAccept reads a SOCKS5 client's greeting and CONNECT request from
// rw and answers the greeting. It answers a request it refuses (an
// unknown command or address type) itself; the answer to a good request
// is socksReply's, once the stream opened or was refused.
func socksAccept(rw io.ReadWriter) (Dest, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(rw, hdr[:]); err != nil {
		return Dest{}, fmt.Errorf("socks5 greeting: %w", err)
	}
	if hdr[0] != socksVersion {
		return Dest{}, &SOCKSError{Msg: fmt.Sprintf("version %d (want 5)", hdr[0])}
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(rw, methods); err != nil {
		return Dest{}, fmt.Errorf("socks5 greeting: %w", err)
	}
	ok := false
	for _, m := range methods {
		ok = ok || m == methodNone
	}
	if !ok {
		_, _ = rw.Write([]byte{socksVersion, methodNoAccept})
		return Dest{}, &SOCKSError{Msg: fmt.Sprintf("the client offers methods %v, not 0 (no authentication)", methods)}
	}
	if _, err := rw.Write([]byte{socksVersion, methodNone}); err != nil {
		return Dest{}, fmt.Errorf("socks5 greeting: %w", err)
	}
	var req [4]byte
	if _, err := io.ReadFull(rw, req[:]); err != nil {
		return Dest{}, fmt.Errorf("socks5 request: %w", err)
	}
	if req[0] != socksVersion {
		return Dest{}, &SOCKSError{Msg: fmt.Sprintf("request of version %d (want 5)", req[0])}
	}
	refuse := func(code byte, msg string) (Dest, error) {
		_ = socksReply(rw, code)
		return Dest{}, &SOCKSError{Reply: code, Msg: msg}
	}
	if req[1] != cmdConnect {
		return refuse(repCmdNotSupported, fmt.Sprintf("command %d: only CONNECT (1) is carried", req[1]))
	}
	// The destination: its type, then as many bytes as the type needs.
	var rest []byte
	switch req[3] {
	case atypIPv4:
		rest = make([]byte, 4+2)
	case atypIPv6:
		rest = make([]byte, 16+2)
	case atypDomain:
		var n [1]byte
		if _, err := io.ReadFull(rw, n[:]); err != nil {
			return Dest{}, fmt.Errorf("socks5 request: %w", err)
		}
		if n[0] == 0 {
			return refuse(repAddrTypeNotSupport, "an empty name")
		}
		rest = append(make([]byte, 0, 1+int(n[0])+2), n[0])
		rest = rest[:1+int(n[0])+2]
		if _, err := io.ReadFull(rw, rest[1:]); err != nil {
			return Dest{}, fmt.Errorf("socks5 request: %w", err)
		}
	default:
		return refuse(repAddrTypeNotSupport, fmt.Sprintf("address type %d (want 1, 3 or 4)", req[3]))
	}
	if req[3] != atypDomain {
		if _, err := io.ReadFull(rw, rest); err != nil {
			return Dest{}, fmt.Errorf("socks5 request: %w", err)
		}
	}
	d, _, err := parseDest(append([]byte{req[3]}, rest...))
	if err != nil {
		return refuse(repAddrTypeNotSupport, err.Error())
	}
	return d, nil
}

// socksReply answers a CONNECT request with code; the bound address is
// not told (0.0.0.0:0), as the server end's socket is on another host.
func socksReply(w io.Writer, code byte) error {
	_, err := w.Write([]byte{socksVersion, code, 0, atypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

// errRefused is a stream the server end did not open.
type errRefused struct {
	code byte
	why  string
}

func (e *errRefused) Error() string { return "the server end refused: " + e.why }

var errStreamGone = errors.New("intproxy: the multi-socket ended before the stream opened")

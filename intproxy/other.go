//go:build !linux

package intproxy

import (
	"errors"
	"net"
	"net/netip"

	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/intnw"
)

// Outside Linux there is no transparent mode and no lane of a socket.

var errLinux = errors.New("intproxy: needs Linux")

// Redirect needs Linux (netfilter).
func Redirect(uint16, []Rule, []netip.AddrPort) (func() error, error) { return nil, errLinux }

// RemoveRedirect needs Linux.
func RemoveRedirect(uint16) error { return errLinux }

func originalDst(net.Conn) (netip.AddrPort, error) { return netip.AddrPort{}, errLinux }

// LaneLabeler labels every connection Default outside Linux.
type LaneLabeler struct {
	Labels    map[string]intnw.Label
	Default   intnw.Label
	V2Root    string
	Namespace string
	Logf      func(format string, args ...any)
}

// Label is the Labeler of l.
func (l *LaneLabeler) Label(net.Conn, netip.AddrPort) (string, intnw.Label) { return "", l.Default }

// Mechanisms: outside Linux the proxy has neither lane labels nor a
// transparent mode.
func Mechanisms() []features.Mechanism {
	return []features.Mechanism{
		{Resource: "proxy labels", Backend: "none: every connection gets --default", Reason: "needs Linux", OK: true},
		{Resource: "proxy transparent mode", Backend: "none: SOCKS5 only", Reason: "needs Linux", OK: true},
	}
}

package intproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/lanes-qos/lanes/intnw"
)

// Labeler tells the lane of the process that opened a local connection
// and the label its stream gets. peerDst is the address the process
// connected to (the proxy's own for SOCKS, the original destination for a
// redirected connection): with the connection's remote address it names
// the process's socket.
type Labeler func(c net.Conn, peerDst netip.AddrPort) (lane string, l intnw.Label)

// Client is the client end: it carries the local connections it accepts
// over one multi-socket to the server end.
type Client struct {
	sess  *session
	label Labeler
}

// handshakeWait bounds a SOCKS5 client's greeting and request.
const handshakeWait = 10 * time.Second

// NewClient serves the streams of conn (a multi-socket to the server end)
// until ctx ends or conn does. label labels each local connection (nil:
// every stream is foreground large, the label of a lane with no intent).
func NewClient(ctx context.Context, conn *intnw.Conn, label Labeler, opts Options) *Client {
	if label == nil {
		label = func(net.Conn, netip.AddrPort) (string, intnw.Label) { return "", intnw.FGLarge }
	}
	c := &Client{sess: newSession(conn, opts, nil), label: label}
	go c.sess.run(ctx)
	return c
}

// Done is closed when the multi-socket has ended.
func (c *Client) Done() <-chan struct{} { return c.sess.done }

// Streams is how many local connections are carried now.
func (c *Client) Streams() int { return c.sess.count() }

// ServeSOCKS accepts SOCKS5 connections from ln until it is closed or the
// multi-socket ends.
func (c *Client) ServeSOCKS(ln net.Listener) error {
	return c.serve(ln, func(nc net.Conn) { c.socks(nc, c.label) })
}

// ServeSOCKSWith is ServeSOCKS with a labeler of its own for ln's
// connections (e.g. one listener per lane where the lane of a connection
// cannot be told from its socket).
func (c *Client) ServeSOCKSWith(ln net.Listener, label Labeler) error {
	return c.serve(ln, func(nc net.Conn) { c.socks(nc, label) })
}

// ServeTransparent accepts connections a netfilter rule redirected to ln
// (see Redirect) and carries each to the destination its program asked
// for, until ln is closed or the multi-socket ends.
func (c *Client) ServeTransparent(ln net.Listener) error {
	return c.serve(ln, c.transparent)
}

func (c *Client) serve(ln net.Listener, handle func(net.Conn)) error {
	stop := context.AfterFunc(ctxOf(c.sess.done), func() { ln.Close() })
	defer stop()
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-c.sess.done:
				return fmt.Errorf("intproxy: the multi-socket ended: %w", c.sess.err)
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go handle(nc)
	}
}

// ctxOf is a context that ends when done is closed.
func ctxOf(done <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-done
		cancel()
	}()
	return ctx
}

func addrPortOf(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

func (c *Client) socks(nc net.Conn, label Labeler) {
	logf := c.sess.opts.Logf
	_ = nc.SetDeadline(time.Now().Add(handshakeWait))
	dest, err := socksAccept(nc)
	if err != nil {
		logf("socks5 from %v: %v", nc.RemoteAddr(), err)
		nc.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	lane, l := label(nc, addrPortOf(nc.LocalAddr()))
	_, err = c.sess.open(nc, dest, l, false, func() error { return socksReply(nc, repSucceeded) })
	if err != nil {
		code := byte(repFailure)
		var r *errRefused
		if errors.As(err, &r) {
			code = r.code
		}
		_ = socksReply(nc, code)
		nc.Close()
		logf("socks5 from %v (lane %q, %v) to %v: %v", nc.RemoteAddr(), lane, l, dest, err)
		return
	}
	logf("socks5 from %v (lane %q, %v) to %v: open", nc.RemoteAddr(), lane, l, dest)
}

func (c *Client) transparent(nc net.Conn) {
	logf := c.sess.opts.Logf
	orig, err := originalDst(nc)
	if err != nil {
		logf("redirected connection from %v: %v", nc.RemoteAddr(), err)
		nc.Close()
		return
	}
	lane, l := c.label(nc, orig)
	dest := Dest{Addr: orig.Addr(), Port: orig.Port()}
	if _, err := c.sess.open(nc, dest, l, true, nil); err != nil {
		logf("redirected from %v (lane %q, %v) to %v: %v", nc.RemoteAddr(), lane, l, dest, err)
		return
	}
	logf("redirected from %v (lane %q, %v) to %v: open", nc.RemoteAddr(), lane, l, dest)
}

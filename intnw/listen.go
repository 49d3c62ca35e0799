package intnw

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/internal/netnsrun"
)

// Listener accepts multi-sockets: a client's first path opens one, and
// its other paths join it.
type Listener struct {
	ln       *net.TCPListener
	opts     Options
	mu       sync.Mutex
	sessions map[[16]byte]*Conn
	accept   chan *Conn
	done     chan struct{}
	closed   bool
}

// maxPending bounds the multi-sockets opened and not yet accepted.
const maxPending = 64

// Listen listens on addr ("198.18.20.1:7000", ":7000") for multi-sockets.
func Listen(addr string, opts *Options) (*Listener, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	var ln net.Listener
	err := netnsrun.Run(o.Namespace, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("intnw: %w", err)
	}
	l := &Listener{ln: ln.(*net.TCPListener), opts: o.withDefaults(), sessions: map[[16]byte]*Conn{},
		accept: make(chan *Conn, maxPending), done: make(chan struct{})}
	go l.serve()
	return l, nil
}

// Addr is the address the listener listens on.
func (l *Listener) Addr() netip.AddrPort { return l.ln.Addr().(*net.TCPAddr).AddrPort() }

// Accept returns the next multi-socket a client opened.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops listening and ends every multi-socket it accepted.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	conns := make([]*Conn, 0, len(l.sessions))
	for _, c := range l.sessions {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	err := l.ln.Close()
	for _, c := range conns {
		c.mu.Lock()
		c.failLocked(ErrClosed)
		c.mu.Unlock()
	}
	return err
}

func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessions[c.id] == c {
		delete(l.sessions, c.id)
	}
}

func (l *Listener) serve() {
	for {
		tc, err := l.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			l.opts.Logf("accept: %v", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go func() {
			if err := l.handshake(tc); err != nil {
				l.opts.Logf("path from %v: %v", tc.RemoteAddr(), err)
			}
		}()
	}
}

// handshake reads a path's hello and joins it to its multi-socket (a new
// one for a new session id).
func (l *Listener) handshake(tc *net.TCPConn) error {
	refuse := func(err error) error {
		_, _ = tc.Write(appendFrame(nil, &frame{typ: tError, data: []byte(err.Error())}))
		tc.Close()
		return err
	}
	_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tuneSocket(tc, l.opts.UserTimeout); err != nil {
		tc.Close()
		return err
	}
	f, err := readFrame(tc)
	if err != nil {
		var pe *ProtocolError
		if errors.As(err, &pe) {
			return refuse(err)
		}
		tc.Close()
		return err
	}
	if f.typ != tHello {
		return refuse(protoErr("%s frame instead of hello", f.typ))
	}
	if f.aux >= maxPaths {
		return refuse(protoErr("path %d, at most %d paths", f.aux, maxPaths))
	}
	var id [16]byte
	copy(id[:], f.data)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return refuse(errors.New("the listener is closed"))
	}
	c := l.sessions[id]
	fresh := c == nil
	if fresh {
		if len(l.accept) >= maxPending {
			l.mu.Unlock()
			return refuse(fmt.Errorf("%d multi-sockets wait to be accepted", maxPending))
		}
		c = newConn(l.opts, false, id)
		c.mu.Lock() // its sampler runs already
		c.lis = l
		c.mu.Unlock()
		l.sessions[id] = c
	}
	l.mu.Unlock()
	if _, err := tc.Write(appendFrame(nil, &frame{typ: tWelcome})); err != nil {
		tc.Close()
		return err
	}
	_ = tc.SetDeadline(time.Time{})
	if err := c.attach(int(f.aux), tc, Path{Name: fmt.Sprintf("path%d", f.aux)}); err != nil {
		return err
	}
	if fresh {
		l.accept <- c
	}
	return nil
}

package intproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"

	"github.com/lanes-qos/lanes/internal/netnsrun"
	"github.com/lanes-qos/lanes/intnw"
)

// Server is the server end: it takes the streams of the multi-sockets it
// accepts and connects each to its destination, if Allow covers it.
type Server struct {
	// Allow lists the destinations streams may reach; a stream to any
	// other is refused (SOCKS5 reply 2, "not allowed by ruleset") and the
	// multi-socket kept. A name is resolved here and its first allowed
	// address used.
	Allow []Rule
	// Dialer connects to destinations (nil: a net.Dialer).
	Dialer *net.Dialer
	// Resolver resolves names (nil: net.DefaultResolver).
	Resolver *net.Resolver
	// Namespace is the network namespace (a path such as
	// /run/netns/NAME) destinations are connected from; "": the
	// caller's. Names are resolved in the caller's.
	Namespace string
	Options   Options
}

// Serve accepts multi-sockets from l and serves each until ctx ends or l
// is closed.
func (s *Server) Serve(ctx context.Context, l *intnw.Listener) error {
	if len(s.Allow) == 0 {
		return errors.New("intproxy: the server end has no allowed destinations")
	}
	for {
		c, err := l.Accept(ctx)
		if err != nil {
			return err
		}
		go func() {
			err := s.ServeConn(ctx, c)
			s.Options.withDefaults().Logf("multi-socket ended: %v", err)
		}()
	}
}

// ServeConn serves one multi-socket until it ends; it returns why.
func (s *Server) ServeConn(ctx context.Context, c *intnw.Conn) error {
	return newSession(c, s.Options, s).run(ctx)
}

// connect connects to d if the allow-list covers it; on failure code is
// the SOCKS5 reply that says why.
func (s *Server) connect(ctx context.Context, d Dest) (net.Conn, byte, error) {
	var cands []netip.AddrPort
	if d.Host != "" {
		r := s.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		addrs, err := r.LookupNetIP(ctx, "ip", d.Host)
		if err != nil {
			return nil, repHostUnreachable, fmt.Errorf("resolve %s: %w", d.Host, err)
		}
		var refused []string
		for _, a := range addrs {
			ap := netip.AddrPortFrom(a.Unmap(), d.Port)
			if allowed(s.Allow, ap) {
				cands = append(cands, ap)
			} else {
				refused = append(refused, ap.String())
			}
		}
		if len(cands) == 0 {
			return nil, repNotAllowed, fmt.Errorf("%s (%s) is outside the allowed destinations (%s)", d, strings.Join(refused, ", "), s.allowList())
		}
	} else {
		ap := netip.AddrPortFrom(d.Addr.Unmap(), d.Port)
		if !allowed(s.Allow, ap) {
			return nil, repNotAllowed, fmt.Errorf("%s is outside the allowed destinations (%s)", ap, s.allowList())
		}
		cands = []netip.AddrPort{ap}
	}
	dl := s.Dialer
	if dl == nil {
		dl = &net.Dialer{}
	}
	var errs []error
	for _, ap := range cands {
		var nc net.Conn
		err := netnsrun.Run(s.Namespace, func() (err error) {
			nc, err = dl.DialContext(ctx, "tcp", ap.String())
			return err
		})
		if err == nil {
			return nc, repSucceeded, nil
		}
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	return nil, replyOf(err), err
}

func (s *Server) allowList() string {
	var b []string
	for _, r := range s.Allow {
		b = append(b, r.String())
	}
	return strings.Join(b, ", ")
}

// replyOf is the SOCKS5 reply that tells a connect error.
func replyOf(err error) byte {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return repRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return repNetUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, context.DeadlineExceeded):
		return repHostUnreachable
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return repTTLExpired
	}
	return repFailure
}

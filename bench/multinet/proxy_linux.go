package multinet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/proxy"

	"github.com/lanes-qos/lanes/intnw"
	"github.com/lanes-qos/lanes/intproxy"
	"github.com/lanes-qos/lanes/testbed/netns"
)

// The proxy arm: the application unmodified, as two programs with a TCP
// connection each, one in an interactive lane (its foreground traffic)
// and one in a background lane (its background traffic), both carried by
// `lanes proxy` (package intproxy) over the multi-socket. In the testbed
// both programs are goroutines of this process, whose sockets share one
// cgroup: each has a SOCKS5 listener of its own that labels what it
// accepts as its lane would (fg-small, bg-large). intproxy's TestLaneLabels
// checks the lane lookup itself with processes in lanes' groups.

// proxied is one end of the proxy arm: a foreground and a background
// connection, each a stream of length-prefixed messages; send picks the
// connection by the label's foreground bit, recv takes from both.
type proxied struct {
	fg, bg *stream
	conn   *intnw.Conn // the client end's multi-socket (nil at the server)
	in     chan message
	done   chan struct{}
	stop   func()
}

func newProxied(fg, bg net.Conn, stop func()) *proxied {
	p := &proxied{fg: newStream(fg), bg: newStream(bg), in: make(chan message, 1024), done: make(chan struct{}), stop: stop}
	for _, s := range []*stream{p.fg, p.bg} {
		go func() {
			for {
				m, err := s.recv(context.Background())
				if err != nil {
					return
				}
				select {
				case p.in <- m:
				case <-p.done:
					return
				}
			}
		}()
	}
	return p
}

func (p *proxied) send(l intnw.Label, _ []uint64, data []byte) (uint64, error) {
	if l.Foreground() {
		return p.fg.send(l, nil, data)
	}
	return p.bg.send(l, nil, data)
}

func (p *proxied) recv(ctx context.Context) (message, error) {
	select {
	case m := <-p.in:
		return m, nil
	case <-ctx.Done():
		return message{}, ctx.Err()
	}
}

func (p *proxied) close() {
	select {
	case <-p.done:
		return
	default:
		close(p.done)
	}
	p.fg.close()
	p.bg.close()
	if p.stop != nil {
		p.stop()
	}
}

// Roles: the first byte a program sends on its connection.
const (
	roleFG byte = 'f'
	roleBG byte = 'b'
)

// connectProxy builds the proxy arm: the server end and the application's
// server in the destination, the client end (one SOCKS5 listener per
// lane) in the source, and the application's two connections through it.
func connectProxy(ctx context.Context, topo *netns.Topology, sc Scenario, port uint16, logf func(string, ...any)) (client, server transport, err error) {
	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()
	// The application's server, on port+1000 in the destination.
	app := netip.AddrPortFrom(topo.Paths[0].DstAddr, port+1000)
	var appLn net.Listener
	if err := netns.Do(topo.Dst, func() (err error) { appLn, err = net.Listen("tcp4", app.String()); return err }); err != nil {
		return nil, nil, err
	}
	cleanup = append(cleanup, func() { appLn.Close() })
	// The proxy's server end.
	lis, err := intnw.Listen(fmt.Sprintf(":%d", port), &intnw.Options{Namespace: "/run/netns/" + topo.Dst})
	if err != nil {
		return nil, nil, err
	}
	cleanup = append(cleanup, func() { lis.Close() })
	pctx, pcancel := context.WithCancel(context.Background())
	cleanup = append(cleanup, pcancel)
	rule := intproxy.Rule{Prefix: netip.PrefixFrom(app.Addr(), 32), Lo: app.Port(), Hi: app.Port()}
	srv := &intproxy.Server{Allow: []intproxy.Rule{rule}, Namespace: "/run/netns/" + topo.Dst, Options: intproxy.Options{Logf: logf}}
	go srv.Serve(pctx, lis)
	// The proxy's client end.
	var paths []intnw.Path
	for i, p := range topo.Paths {
		paths = append(paths, intnw.Path{Name: sc.Links[i].Name, Local: p.SrcAddr,
			Remote: netip.AddrPortFrom(p.DstAddr, port), Bandwidth: float64(sc.Links[i].Rate)})
	}
	conn, err := intnw.Dial(ctx, paths, &intnw.Options{Namespace: "/run/netns/" + topo.Src, Logf: logf})
	if err != nil {
		return nil, nil, err
	}
	cleanup = append(cleanup, func() { conn.Close(time.Second) })
	pc := intproxy.NewClient(pctx, conn, nil, intproxy.Options{Logf: logf})
	socks := map[byte]net.Listener{}
	lanes := map[byte]string{roleFG: "interactive", roleBG: "background"}
	for role, l := range map[byte]intnw.Label{roleFG: intnw.FGSmall, roleBG: intnw.BGLarge} {
		var ln net.Listener
		if err := netns.Do(topo.Src, func() (err error) { ln, err = net.Listen("tcp4", "127.0.0.1:0"); return err }); err != nil {
			return nil, nil, err
		}
		cleanup = append(cleanup, func() { ln.Close() })
		socks[role] = ln
		go pc.ServeSOCKSWith(ln, func(net.Conn, netip.AddrPort) (string, intnw.Label) { return lanes[role], l })
	}
	// The application's two connections, and its server's two accepts.
	accepted := make(chan net.Conn, 2)
	go func() {
		for range 2 {
			c, err := appLn.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	conns := map[byte]net.Conn{}
	for _, role := range []byte{roleFG, roleBG} {
		d, err := proxy.SOCKS5("tcp", socks[role].Addr().String(), nil, &net.Dialer{})
		if err != nil {
			return nil, nil, err
		}
		var c net.Conn
		if err := netns.Do(topo.Src, func() (err error) { c, err = d.Dial("tcp", app.String()); return err }); err != nil {
			return nil, nil, fmt.Errorf("through the proxy: %w", err)
		}
		cleanup = append(cleanup, func() { c.Close() })
		if _, err := c.Write([]byte{role}); err != nil {
			return nil, nil, err
		}
		conns[role] = c
	}
	srvConns := map[byte]net.Conn{}
	for range 2 {
		select {
		case c, ok := <-accepted:
			if !ok {
				return nil, nil, errors.New("the application's server did not accept")
			}
			cleanup = append(cleanup, func() { c.Close() })
			var role [1]byte
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Read(role[:]); err != nil {
				return nil, nil, fmt.Errorf("the application's server: %w", err)
			}
			_ = c.SetReadDeadline(time.Time{})
			srvConns[role[0]] = c
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	if srvConns[roleFG] == nil || srvConns[roleBG] == nil {
		return nil, nil, errors.New("the application's server got two connections of one role")
	}
	stop := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	cl := newProxied(conns[roleFG], conns[roleBG], nil)
	cl.conn = conn
	return cl, newProxied(srvConns[roleFG], srvConns[roleBG], stop), nil
}

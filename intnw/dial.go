package intnw

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/lanes-qos/lanes/internal/netnsrun"
)

// Dial opens a multi-socket to a peer over paths: it returns once one path
// is up, and keeps trying the others (and any that goes down) every
// Options.Redial, and at once when the network gives a path's local
// address back (WatchAddresses).
func Dial(ctx context.Context, paths []Path, opts *Options) (*Conn, error) {
	if err := checkPaths(paths); err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("intnw: session id: %w", err)
	}
	c := newConn(o, true, id)
	c.mu.Lock() // its sampler runs already
	for i, p := range paths {
		c.path(i).cfg = p
		c.dialing[i] = true
	}
	c.mu.Unlock()
	// Watching before the first dial: an address removed at any time
	// after Dial returns is seen.
	stopWatch := c.watchAddresses()
	type result struct {
		i   int
		err error
	}
	res := make(chan result, len(paths))
	for i := range paths {
		go func() { res <- result{i, c.dialPath(ctx, i)} }()
	}
	var errs []error
	up := false
	for range paths {
		r := <-res
		if r.err == nil {
			up = true
			break
		}
		errs = append(errs, fmt.Errorf("%s: %w", pathName(paths[r.i], r.i), r.err))
	}
	if !up {
		c.mu.Lock()
		c.failLocked(ErrNoPath)
		c.mu.Unlock()
		stopWatch()
		return nil, fmt.Errorf("intnw: no path to the peer: %w", errors.Join(errs...))
	}
	go c.redialer(len(paths), stopWatch)
	return c, nil
}

func pathName(p Path, i int) string {
	if p.Name != "" {
		return p.Name
	}
	return fmt.Sprintf("path%d", i)
}

// checkPaths says what is wrong with a client's paths.
func checkPaths(paths []Path) error {
	if len(paths) == 0 {
		return errors.New("intnw: no paths")
	}
	if len(paths) > maxPaths {
		return fmt.Errorf("intnw: %d paths, at most %d", len(paths), maxPaths)
	}
	seen := map[string]bool{}
	for i, p := range paths {
		n := pathName(p, i)
		switch {
		case seen[n]:
			return fmt.Errorf("intnw: two paths named %q", n)
		case !p.Remote.IsValid() || p.Remote.Port() == 0:
			return fmt.Errorf("intnw: path %s: the peer's address %q is not an address and port", n, p.Remote)
		case p.Local.IsValid() && p.Local.Is4() != p.Remote.Addr().Is4():
			return fmt.Errorf("intnw: path %s: local %v and peer %v are not of one family", n, p.Local, p.Remote.Addr())
		case p.Bandwidth < 0:
			return fmt.Errorf("intnw: path %s: bandwidth %g is negative", n, p.Bandwidth)
		}
		seen[n] = true
	}
	return nil
}

// dialPath connects path i and joins it to the session.
func (c *Conn) dialPath(ctx context.Context, i int) (err error) {
	defer func() {
		c.mu.Lock()
		delete(c.dialing, i)
		c.mu.Unlock()
	}()
	c.mu.Lock()
	cfg := c.path(i).cfg
	c.mu.Unlock()
	d := net.Dialer{Timeout: handshakeTimeout}
	if cfg.Local.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: cfg.Local.AsSlice()}
	}
	if cfg.Device != "" {
		d.Control = bindToDevice(cfg.Device)
	}
	var nc net.Conn
	err = netnsrun.Run(c.opts.Namespace, func() (err error) {
		nc, err = d.DialContext(ctx, "tcp", cfg.Remote.String())
		return err
	})
	if err != nil {
		return err
	}
	tc := nc.(*net.TCPConn)
	if err := tuneSocket(tc, c.opts.UserTimeout); err != nil {
		tc.Close()
		return fmt.Errorf("socket options: %w", err)
	}
	_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if _, err := tc.Write(appendFrame(nil, &frame{typ: tHello, aux: uint32(i), data: c.id[:]})); err != nil {
		tc.Close()
		return fmt.Errorf("hello: %w", err)
	}
	f, err := readFrame(tc)
	if err != nil {
		tc.Close()
		return fmt.Errorf("welcome: %w", err)
	}
	switch f.typ {
	case tWelcome:
	case tError:
		tc.Close()
		return fmt.Errorf("the peer refused: %s", f.data)
	default:
		tc.Close()
		return protoErr("%s frame instead of welcome", f.typ)
	}
	_ = tc.SetDeadline(time.Time{})
	return c.attach(i, tc, cfg)
}

// redialer retries the paths that are down.
func (c *Conn) redialer(n int, stopWatch func()) {
	t := time.NewTicker(c.opts.Redial)
	defer t.Stop()
	defer stopWatch()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		case <-c.redial:
		}
		c.redialDown(n)
	}
}

// redialDown starts a dial of every path that is down and not dialling.
func (c *Conn) redialDown(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.closing {
		return
	}
	for i := 0; i < n; i++ {
		if p := c.path(i); !p.up && !c.dialing[i] {
			c.dialing[i] = true
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
				defer cancel()
				err := c.dialPath(ctx, i)
				c.mu.Lock()
				p := c.path(i)
				msg := ""
				if err != nil {
					msg = err.Error()
				}
				changed := msg != p.dialErr
				p.dialErr = msg
				name := pathName(p.cfg, i)
				c.mu.Unlock()
				if err != nil && changed {
					c.opts.Logf("path %s: %v (retrying every %v)", name, err, c.opts.Redial)
				}
			}()
		}
	}
}

// pathGone takes down the path whose local address is addr (the network
// took it away).
func (c *Conn) addressGone(addr net.IP) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.paths {
		if p.up && p.cfg.Local.IsValid() && net.IP(p.cfg.Local.AsSlice()).Equal(addr) {
			c.downLocked(p, fmt.Errorf("address %v removed", addr), true)
		}
	}
}

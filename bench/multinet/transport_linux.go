package multinet

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/intnw"
	"github.com/lanes-qos/lanes/testbed/netns"
)

// message is what an application receives.
type message struct {
	label intnw.Label
	data  []byte
}

// transport is one end of an arm's connection.
type transport interface {
	// send sends data labelled l after the messages in deps (ids send
	// returned); a transport without labels ignores both.
	send(l intnw.Label, deps []uint64, data []byte) (uint64, error)
	recv(ctx context.Context) (message, error)
	close()
}

// stream is a transport over one ordered byte stream (TCP or MPTCP):
// length-prefixed messages, sent by a writer of its own in the order
// given (as a socket with an unbounded buffer would), labels ignored.
type stream struct {
	c     net.Conn
	mu    sync.Mutex
	queue [][]byte
	// writing is true while the writer has data the socket has not
	// taken (its buffer full); idle are the callbacks waiting for it to
	// have taken all.
	writing bool
	idle    []*pending
	wake    chan struct{}
	in      chan message
	err     error
	done    chan struct{}
	nextID  uint64
	lis     net.Listener // closed with the stream (nil: none)
}

func newStream(c net.Conn) *stream {
	s := &stream{c: c, wake: make(chan struct{}, 1), in: make(chan message, 1024), done: make(chan struct{})}
	go s.writer()
	go s.reader()
	return s
}

func (s *stream) send(_ intnw.Label, _ []uint64, data []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	s.queue = append(s.queue, binary.BigEndian.AppendUint32(nil, uint32(len(data))), data)
	s.nextID++
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return s.nextID, nil
}

func (s *stream) writer() {
	for {
		s.mu.Lock()
		q := s.queue
		s.queue = nil
		s.writing = len(q) > 0
		if !s.writing {
			for _, p := range s.idle {
				if !p.done {
					p.done = true
					go p.fn()
				}
			}
			s.idle = nil
		}
		s.mu.Unlock()
		if len(q) == 0 {
			select {
			case <-s.wake:
				continue
			case <-s.done:
				return
			}
		}
		bufs := net.Buffers(q)
		if _, err := bufs.WriteTo(s.c); err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
	}
}

func (s *stream) reader() {
	defer close(s.in)
	r := bufio.NewReaderSize(s.c, 64<<10)
	var h [4]byte
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return
		}
		b := make([]byte, binary.BigEndian.Uint32(h[:]))
		if _, err := io.ReadFull(r, b); err != nil {
			return
		}
		select {
		case s.in <- message{data: b}:
		case <-s.done:
			return
		}
	}
}

func (s *stream) recv(ctx context.Context) (message, error) {
	select {
	case m, ok := <-s.in:
		if !ok {
			return message{}, io.EOF
		}
		return m, nil
	case <-ctx.Done():
		return message{}, ctx.Err()
	}
}

func (s *stream) close() {
	s.mu.Lock()
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.mu.Unlock()
	s.c.Close()
	if s.lis != nil {
		s.lis.Close()
	}
}

// pending is a callback waiting for a stream's socket to take what it
// was given.
type pending struct {
	fn   func()
	done bool // run or cancelled
}

// selecting is a stream used as the seed's application without
// Intentional Networking uses its socket: it asks (select) whether the
// socket can take more, and holds what it cannot send now. sendOrDefer
// defers a send while the socket has not taken everything given before
// (its buffer is full), and calls fn once it has.
type selecting struct{ *stream }

func (s selecting) sendOrDefer(l intnw.Label, deps []uint64, data []byte, fn func()) (uint64, func() bool, error) {
	s.mu.Lock()
	if s.err == nil && (s.writing || len(s.queue) > 0) {
		p := &pending{fn: fn}
		s.idle = append(s.idle, p)
		s.mu.Unlock()
		return 0, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			was := !p.done
			p.done = true
			return was
		}, nil
	}
	s.mu.Unlock()
	id, err := s.send(l, deps, data)
	return id, nil, err
}

// multi is a transport over an intnw multi-socket; labels false sends
// everything bg-large, each message after the one before.
type multi struct {
	c      *intnw.Conn
	labels bool
}

func (m *multi) send(l intnw.Label, deps []uint64, data []byte) (uint64, error) {
	if !m.labels {
		return m.c.Send(intnw.BGLarge, data, nil)
	}
	return m.c.SendAfter(l, deps, data, nil)
}

func (m *multi) recv(ctx context.Context) (message, error) {
	msg, err := m.c.Recv(ctx)
	return message{label: msg.Label, data: msg.Data}, err
}

func (m *multi) close() { m.c.Close(time.Second) }

// deferrer is a transport that can defer a send: sendOrDefer sends as
// send does or, when the label cannot go now, registers fn to be called
// when it can and returns the thunk's cancel function instead of an id.
type deferrer interface {
	transport
	sendOrDefer(l intnw.Label, deps []uint64, data []byte, fn func()) (id uint64, cancel func() bool, err error)
}

// thunked is the labelled multi-socket with thunks (the seed's
// application): its sends may be deferred.
type thunked struct{ *multi }

func (m thunked) sendOrDefer(l intnw.Label, deps []uint64, data []byte, fn func()) (uint64, func() bool, error) {
	id, err := m.c.SendAfter(l, deps, data, fn)
	if d, ok := errors.AsType[*intnw.DeferredError](err); ok {
		return 0, d.Cancel, nil
	}
	return id, nil, err
}

// connect makes an arm's client and server ends on topo with the
// scenario's links.
func connect(ctx context.Context, arm string, topo *netns.Topology, sc Scenario, port uint16, logf func(string, ...any)) (client, server transport, err error) {
	switch arm {
	case "proxy":
		return connectProxy(ctx, topo, sc, port, logf)
	case "intnw", "intnw-nolabels", "intnw-nohint", "intnw-noprobe", "intnw-nothunk":
		probe := 0 // the default
		if arm == "intnw-noprobe" {
			probe = -1
		}
		lis, err := intnw.Listen(fmt.Sprintf(":%d", port), &intnw.Options{Namespace: "/run/netns/" + topo.Dst, ProbeSize: probe})
		if err != nil {
			return nil, nil, err
		}
		var paths []intnw.Path
		for i, p := range topo.Paths {
			hint := float64(sc.Links[i].Rate)
			if arm == "intnw-nohint" || arm == "intnw-noprobe" {
				hint = 0
			}
			paths = append(paths, intnw.Path{Name: sc.Links[i].Name, Local: p.SrcAddr,
				Remote: netip.AddrPortFrom(p.DstAddr, port), Bandwidth: hint})
		}
		c, err := intnw.Dial(ctx, paths, &intnw.Options{Namespace: "/run/netns/" + topo.Src, Logf: logf, ProbeSize: probe})
		if err != nil {
			lis.Close()
			return nil, nil, err
		}
		s, err := lis.Accept(ctx)
		if err != nil {
			c.Close(0)
			lis.Close()
			return nil, nil, err
		}
		labels := arm != "intnw-nolabels"
		var client transport = &multi{c: c, labels: labels}
		if labels && arm != "intnw-nothunk" {
			client = thunked{client.(*multi)}
		}
		// The listener goes with the server end; paths joining later
		// need it, so it is closed when the server end is.
		return client, &closing{&multi{c: s, labels: labels}, lis}, nil
	case "single0", "single1", "mptcp", "mptcp-select":
		i := 0
		if arm == "single1" {
			i = 1
		}
		mptcp := arm == "mptcp" || arm == "mptcp-select"
		if mptcp {
			// The first subflow on the continuous network of least RTT;
			// the server announces its address on the other.
			i = firstSubflow(sc)
			if err := setupMPTCP(topo, 1-i); err != nil {
				return nil, nil, err
			}
		}
		var ln net.Listener
		err := netns.Do(topo.Dst, func() (err error) {
			var lc net.ListenConfig
			lc.SetMultipathTCP(mptcp)
			ln, err = lc.Listen(ctx, "tcp4", fmt.Sprintf("0.0.0.0:%d", port))
			return err
		})
		if err != nil {
			return nil, nil, err
		}
		// MPTCP's later subflows join through the listener: it stays open
		// as long as the server end.
		keep := false
		defer func() {
			if !keep {
				ln.Close()
			}
		}()
		accepted := acceptOne(ln)
		var c net.Conn
		err = netns.Do(topo.Src, func() (err error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: topo.Paths[i].SrcAddr.AsSlice()}}
			d.SetMultipathTCP(mptcp)
			c, err = d.DialContext(ctx, "tcp4", netip.AddrPortFrom(topo.Paths[i].DstAddr, port).String())
			return err
		})
		if err != nil {
			return nil, nil, err
		}
		if mptcp {
			if ok, err := c.(*net.TCPConn).MultipathTCP(); err != nil || !ok {
				c.Close()
				return nil, nil, fmt.Errorf("the connection is not MPTCP (%v)", err)
			}
		}
		select {
		case sc, ok := <-accepted:
			if !ok {
				c.Close()
				return nil, nil, errors.New("accept failed")
			}
			keep = true
			srv := newStream(sc)
			srv.lis = ln
			if arm == "mptcp-select" {
				return selecting{newStream(c)}, srv, nil
			}
			return newStream(c), srv, nil
		case <-ctx.Done():
			c.Close()
			return nil, nil, ctx.Err()
		}
	}
	return nil, nil, fmt.Errorf("unknown arm %q", arm)
}

// acceptOne accepts one connection on ln in the background: the channel
// gets it, or is closed when Accept fails.
func acceptOne(ln net.Listener) <-chan net.Conn {
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	return accepted
}

// closing closes a listener with its transport.
type closing struct {
	transport
	lis *intnw.Listener
}

func (c *closing) close() { c.transport.close(); c.lis.Close() }

// firstSubflow is the link MPTCP's first subflow takes: the continuous
// one of least RTT.
func firstSubflow(sc Scenario) int {
	best := -1
	for i, l := range sc.Links {
		if l.MeanUp == 0 && (best < 0 || l.RTT < sc.Links[best].RTT) {
			best = i
		}
	}
	if best < 0 {
		return 0
	}
	return best
}

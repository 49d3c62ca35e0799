package intproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/intnw"
)

// Options tune either end; the zero value is the defaults.
type Options struct {
	// QueueBytes bounds the bytes received on one stream and not yet
	// written to its local connection. Past it the multi-socket is not
	// read until the stream's local reader catches up, so a reader that
	// stops holds every stream back; 0: 4 MiB.
	QueueBytes int
	// OpenTimeout bounds a stream's opening: the server end's connect to
	// the destination, and the client end's wait for its answer; 0: 15s.
	OpenTimeout time.Duration
	// Logf logs streams opened, refused and reset.
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.QueueBytes <= 0 {
		o.QueueBytes = 4 << 20
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = 15 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// readBuf is the most one data message carries.
const readBuf = 32 << 10

// session is the streams of one multi-socket, at either end.
type session struct {
	conn *intnw.Conn
	opts Options
	srv  *Server // nil at the client end

	mu      sync.Mutex
	streams map[uint32]*stream
	next    uint32 // the client end's last stream id
	err     error  // why the session ended
	done    chan struct{}
}

func newSession(conn *intnw.Conn, opts Options, srv *Server) *session {
	return &session{conn: conn, opts: opts.withDefaults(), srv: srv, streams: map[uint32]*stream{}, done: make(chan struct{})}
}

// run delivers the multi-socket's messages to their streams until it
// ends, and then ends every stream. A message that does not parse, or
// that only the other end may send, ends the multi-socket: its peer does
// not speak this protocol. Data for a stream this end no longer has (reset
// meanwhile) is dropped.
func (s *session) run(ctx context.Context) error {
	err := s.loop(ctx)
	s.mu.Lock()
	s.err = err
	streams := make([]*stream, 0, len(s.streams))
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	close(s.done)
	for _, st := range streams {
		st.abort(fmt.Errorf("the multi-socket ended: %w", err), false)
	}
	return err
}

func (s *session) loop(ctx context.Context) error {
	for {
		m, err := s.conn.Recv(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return intnw.ErrClosed
			}
			return err
		}
		pm, err := parseMsg(m.Data)
		if err == nil {
			err = s.dispatch(ctx, pm)
		}
		if err != nil {
			s.opts.Logf("%v: closing the multi-socket", err)
			_ = s.conn.Close(time.Second)
			return err
		}
	}
}

func (s *session) stream(id uint32) *stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[id]
}

func (s *session) dispatch(ctx context.Context, m *msg) error {
	client := s.srv == nil
	switch m.kind {
	case kOpen:
		if client {
			return fmt.Errorf("intproxy: the server end opened stream %d", m.stream)
		}
		s.accept(ctx, m)
		return nil
	case kOpened, kRefused:
		if !client {
			return fmt.Errorf("intproxy: the client end sent %v on stream %d", m.kind, m.stream)
		}
		if st := s.stream(m.stream); st != nil {
			var err error
			if m.kind == kRefused {
				err = &errRefused{code: m.code, why: m.text}
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			if st.reset {
				return nil // given up here meanwhile
			}
			select {
			case st.opened <- err:
			default:
				return fmt.Errorf("intproxy: stream %d answered twice", m.stream)
			}
		}
		return nil
	}
	st := s.stream(m.stream)
	if st == nil {
		return nil // reset here meanwhile
	}
	switch m.kind {
	case kData:
		st.deliver(m.data)
	case kFin:
		st.mu.Lock()
		st.fin = true
		st.cond.Broadcast()
		st.mu.Unlock()
	case kReset:
		st.abort(fmt.Errorf("reset by the peer: %s", m.text), false)
	}
	return nil
}

// accept opens a stream the client end asked for: the server end connects
// to its destination if the allow-list permits it, and answers.
func (s *session) accept(ctx context.Context, m *msg) {
	s.mu.Lock()
	if s.streams[m.stream] != nil {
		s.mu.Unlock()
		// Not a stream of its own: the refusal resets the client's.
		st := &stream{s: s, id: m.stream, label: m.label}
		_ = st.send(&msg{kind: kReset, text: fmt.Sprintf("stream %d opened twice", m.stream)})
		s.opts.Logf("stream %d: opened twice; reset", m.stream)
		return
	}
	st := newStream(s, m.stream, m.label, m.dest)
	s.streams[m.stream] = st
	s.mu.Unlock()
	go func() {
		cctx, cancel := context.WithTimeout(ctx, s.opts.OpenTimeout)
		defer cancel()
		nc, code, err := s.srv.connect(cctx, m.dest)
		if err != nil {
			s.opts.Logf("stream %d (%v) to %v: refused: %v", m.stream, m.label, m.dest, err)
			_ = st.send(&msg{kind: kRefused, code: code, text: err.Error()})
			st.abort(err, false)
			return
		}
		s.opts.Logf("stream %d (%v) to %v: connected from %v", m.stream, m.label, m.dest, nc.LocalAddr())
		if err := st.send(&msg{kind: kOpened}); err != nil {
			nc.Close()
			st.abort(err, false)
			return
		}
		st.start(nc)
	}()
}

// open opens a stream from the client end to dest for local: it returns
// once the server end connected (or refused, or the multi-socket ended).
// With early, local's bytes are carried at once, before the answer (the
// server end holds them until it has connected); without, opened (if not
// nil) is called with the answer before any byte is carried, and local is
// left to the caller if the stream did not open.
func (s *session) open(local net.Conn, dest Dest, label intnw.Label, early bool, opened func() error) (*stream, error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil, s.err
	}
	s.next++
	st := newStream(s, s.next, label, dest)
	s.streams[st.id] = st
	s.mu.Unlock()
	if err := st.send(&msg{kind: kOpen, label: label, dest: dest}); err != nil {
		st.abort(err, false)
		return nil, err
	}
	if early {
		st.start(local)
	}
	var err error
	select {
	case err = <-st.opened:
	case <-time.After(s.opts.OpenTimeout + 5*time.Second):
		err = fmt.Errorf("no answer from the server end in %v", s.opts.OpenTimeout+5*time.Second)
	case <-s.done:
		err = errStreamGone
	}
	if err != nil {
		// Without early the caller still holds local (to answer on it).
		var r *errRefused
		st.abort(err, !errors.As(err, &r))
		return nil, err
	}
	if !early {
		if opened != nil {
			if err := opened(); err != nil {
				st.abort(err, true)
				return nil, err
			}
		}
		st.start(local)
	}
	return st, nil
}

// stream is one local connection carried over the multi-socket.
type stream struct {
	s     *session
	id    uint32
	label intnw.Label // of the data this end sends
	dest  Dest

	sendMu sync.Mutex
	last   uint64 // the IROB this end sent last on the stream (0: none)

	mu     sync.Mutex
	cond   *sync.Cond
	local  net.Conn
	queue  [][]byte
	queued int
	fin    bool // the peer sends no more
	reset  bool
	ended  [2]bool // this end's reader and writer are done
	opened chan error
}

func newStream(s *session, id uint32, label intnw.Label, dest Dest) *stream {
	st := &stream{s: s, id: id, label: label, dest: dest, opened: make(chan error, 1)}
	st.cond = sync.NewCond(&st.mu)
	return st
}

// send sends m after the stream's previous message. Data goes with the
// stream's label, the rest with its small form.
func (st *stream) send(m *msg) error {
	m.stream = st.id
	l := st.label
	if m.kind != kData {
		l &^= intnw.Large
	}
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	var deps []uint64
	if st.last != 0 {
		deps = []uint64{st.last}
	}
	id, err := st.s.conn.SendAfter(l, deps, m.encode(), nil)
	if err != nil {
		return err
	}
	st.last = id
	return nil
}

// deliver queues bytes for the local connection; it waits while the
// stream holds Options.QueueBytes.
func (st *stream) deliver(b []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.queued >= st.s.opts.QueueBytes && !st.reset {
		st.cond.Wait()
	}
	if st.reset {
		return
	}
	st.queue = append(st.queue, b)
	st.queued += len(b)
	st.cond.Broadcast()
}

// start carries the stream's bytes both ways over local.
func (st *stream) start(local net.Conn) {
	st.mu.Lock()
	st.local = local
	reset := st.reset
	st.mu.Unlock()
	if reset {
		local.Close()
		return
	}
	go st.pumpOut()
	go st.pumpIn()
}

// pumpOut carries what the local connection sends to the peer.
func (st *stream) pumpOut() {
	buf := make([]byte, readBuf)
	for {
		n, err := st.local.Read(buf)
		if n > 0 {
			if serr := st.send(&msg{kind: kData, data: buf[:n]}); serr != nil {
				st.abort(serr, false)
				return
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			if serr := st.send(&msg{kind: kFin}); serr != nil {
				st.abort(serr, false)
				return
			}
			if tc, ok := st.local.(interface{ CloseRead() error }); ok {
				_ = tc.CloseRead()
			}
			st.end(0)
			return
		}
		st.abort(err, true)
		return
	}
}

// pumpIn writes what the peer sent to the local connection.
func (st *stream) pumpIn() {
	for {
		st.mu.Lock()
		for len(st.queue) == 0 && !st.fin && !st.reset {
			st.cond.Wait()
		}
		if st.reset {
			st.mu.Unlock()
			return
		}
		if len(st.queue) == 0 {
			st.mu.Unlock()
			if tc, ok := st.local.(interface{ CloseWrite() error }); ok {
				_ = tc.CloseWrite()
			}
			st.end(1)
			return
		}
		b := st.queue[0]
		st.queue[0] = nil
		st.queue = st.queue[1:]
		st.mu.Unlock()
		_, err := st.local.Write(b)
		st.mu.Lock()
		st.queued -= len(b)
		st.cond.Broadcast()
		st.mu.Unlock()
		if err != nil {
			st.abort(err, true)
			return
		}
	}
}

// end marks one direction done (0: to the peer, 1: from it); with both,
// the stream is over.
func (st *stream) end(dir int) {
	st.mu.Lock()
	st.ended[dir] = true
	over := st.ended[0] && st.ended[1] && !st.reset
	if over {
		st.reset = true
	}
	local := st.local
	st.mu.Unlock()
	if over {
		if local != nil {
			local.Close()
		}
		st.s.forget(st)
	}
}

// abort ends the stream at once; tell sends the peer a reset.
func (st *stream) abort(why error, tell bool) {
	st.mu.Lock()
	if st.reset {
		st.mu.Unlock()
		return
	}
	st.reset = true
	st.queue, st.queued = nil, 0
	st.cond.Broadcast()
	local := st.local
	// An open still waiting for its answer has it now (under st.mu, so
	// that an answer from the peer that races it is dropped, not taken for
	// a second one).
	select {
	case st.opened <- why:
	default:
	}
	st.mu.Unlock()
	if local != nil {
		local.Close()
	}
	if tell {
		_ = st.send(&msg{kind: kReset, text: why.Error()})
	}
	st.s.opts.Logf("stream %d (%v, %v): %v", st.id, st.label, st.dest, why)
	st.s.forget(st)
}

func (s *session) forget(st *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[st.id] == st {
		delete(s.streams, st.id)
	}
}

// count is how many streams the session carries.
func (s *session) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

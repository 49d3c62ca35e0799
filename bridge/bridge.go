package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
)

// Options are how a bridge runs, beside its settings.
type Options struct {
	// Logf receives connection changes and refused events (rate-limited).
	Logf func(format string, args ...any)
	// Dialer, when set, opens the connections to the server (tests dial
	// from inside a network namespace).
	Dialer nats.CustomDialer
	// ReconnectWait is the pause between attempts to reach the server
	// (DefaultReconnectWait when 0).
	ReconnectWait time.Duration
	// DrainTimeout bounds how long Close waits for the buffer to be sent
	// (DefaultDrainTimeout when 0).
	DrainTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultReconnectWait = time.Second
	DefaultDrainTimeout  = 2 * time.Second
)

// Stats are a bridge's counters. Every event the export side took from
// the bus is in exactly one of Sent, Buffered, Lost and Expired (Stats
// reads them while the bridge runs: an event on its way from the bus's
// queue into the buffer may be missing from one reading for that
// instant).
type Stats struct {
	URL  string
	Host string
	// Connected: the connection to the server is up now; Server is the
	// server's address when it is.
	Connected bool
	Server    string
	// Reconnects counts connections re-established after a loss.
	Reconnects uint64
	// Export side. Sent were handed to the connection; Buffered wait
	// for it; Lost did not fit the buffer (the oldest go), or could not be
	// encoded or sent (too large for the server); Expired passed their
	// deadline before they could be sent; FilterErrors failed the out
	// filter's evaluation.
	Sent, Buffered, Lost, Expired, FilterErrors uint64
	// Import side. Received were published on the bus; Refused were bad
	// (undecodable, invalid, from a host using this host's name);
	// Filtered were refused by the in filter (or failed it); Dropped did
	// not fit the client's pending queue (a slow bus consumer).
	Received, Refused, Filtered, Dropped uint64
	// LastError is the last connection error or refusal ("" when none).
	LastError string
}

// Bridge is a running bridge between a bus and a NATS server.
type Bridge struct {
	cfg  lane.Bridge
	bus  *events.Bus
	opts Options
	logf func(string, ...any)

	nc    *nats.Conn
	out   *events.Subscription // nil when nothing is exported
	in    *events.Filter
	nsubs []*nats.Subscription

	mu       sync.Mutex
	ring     []events.Event
	head, n  int
	inflight int
	wake     chan struct{}

	ctx                                       context.Context
	cancel                                    context.CancelFunc
	pumpDone, sendDone                        chan struct{}
	sent, lost, expired, reconnects           atomic.Uint64
	received, refused, filtered, filterErrors atomic.Uint64
	lastErr                                   atomic.Pointer[string]
	lastLog                                   atomic.Int64
	closeOnce                                 sync.Once
	closing                                   atomic.Bool
}

// exportQueue bounds the bus queue between the bus and the buffer (the
// bridge takes from it at once; it absorbs bursts the pump has not yet
// moved). Like the buffer it drops the oldest, counted lost, so that what
// survives an overflow anywhere is the newest events.
const exportQueue = 16384

// loopGuard keeps imported events from being exported again.
const loopGuard = `!source.startsWith("host/")`

// Start connects bus to the server of cfg (validated by package lane) and
// starts carrying events both ways. It does not wait for the server: while
// it is unreachable, exported events are buffered and the bridge keeps
// trying.
func Start(bus *events.Bus, cfg lane.Bridge, opts Options) (*Bridge, error) {
	if !cfg.Enabled() {
		return nil, errors.New("bridge: no url")
	}
	if cfg.Host == "" || strings.Contains(cfg.Host, ".") {
		return nil, fmt.Errorf("bridge: host %q is not one token", cfg.Host)
	}
	if cfg.Buffer < 1 {
		return nil, fmt.Errorf("bridge: buffer %d: want at least 1", cfg.Buffer)
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.ReconnectWait <= 0 {
		opts.ReconnectWait = DefaultReconnectWait
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	b := &Bridge{cfg: cfg, bus: bus, opts: opts, logf: opts.Logf,
		wake: make(chan struct{}, 1), pumpDone: make(chan struct{}), sendDone: make(chan struct{})}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if cfg.In != "" {
		f, err := events.CompileFilter(cfg.In)
		if err != nil {
			return nil, fmt.Errorf("bridge: in filter: %w", err)
		}
		b.in = f
	}
	nopts := []nats.Option{
		nats.Name("lanesd " + cfg.Host),
		nats.NoEcho(),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(opts.ReconnectWait),
		nats.ReconnectJitter(opts.ReconnectWait/10, opts.ReconnectWait/10),
		// No buffer in the client: while disconnected Publish fails and the
		// event stays in the bridge's own buffer, where it is counted.
		nats.ReconnectBufSize(-1),
		nats.Timeout(2 * time.Second),
		nats.PingInterval(5 * time.Second),
		nats.MaxPingsOutstanding(2),
		nats.ConnectHandler(func(c *nats.Conn) {
			b.logf("bridge: connected to %s as host %s", cfg.URL, cfg.Host)
			b.signal()
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			b.reconnects.Add(1)
			b.logf("bridge: reconnected to %s", c.ConnectedUrlRedacted())
			b.signal()
		}),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if b.closing.Load() {
				return
			}
			msg := "disconnected"
			if err != nil {
				msg = "disconnected: " + err.Error()
			}
			b.setErr(msg)
			b.logf("bridge: %s; buffering up to %d events", msg, cfg.Buffer)
		}),
		nats.ErrorHandler(func(c *nats.Conn, s *nats.Subscription, err error) {
			b.setErr(err.Error())
			b.logOften("bridge: %v", err)
		}),
	}
	if cfg.Credentials != "" {
		if _, err := os.Stat(cfg.Credentials); err != nil {
			return nil, fmt.Errorf("bridge: credentials: %w", err)
		}
		nopts = append(nopts, nats.UserCredentials(cfg.Credentials))
	}
	if opts.Dialer != nil {
		nopts = append(nopts, nats.SetCustomDialer(opts.Dialer))
	}
	nc, err := nats.Connect(cfg.URL, nopts...)
	if err != nil {
		return nil, fmt.Errorf("bridge: connect to %s: %w", cfg.URL, err)
	}
	b.nc = nc
	for _, p := range cfg.Import {
		s, err := nc.Subscribe(Subject("*", p), b.receive)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("bridge: subscribe to %s: %w", Subject("*", p), err)
		}
		s.SetPendingLimits(65536, 64<<20)
		b.nsubs = append(b.nsubs, s)
	}
	if len(cfg.Export) > 0 {
		filter := loopGuard
		if cfg.Out != "" {
			filter += " && (" + cfg.Out + "\n)"
		}
		sub, err := bus.Subscribe(events.Options{Name: "bridge/export", Topics: cfg.Export, Out: filter,
			Queue: min(cfg.Buffer, exportQueue), Drop: events.DropOldest})
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("bridge: out filter: %w", err)
		}
		b.out = sub
		b.ring = make([]events.Event, cfg.Buffer)
		go b.pump()
		go b.send()
	} else {
		close(b.pumpDone)
		close(b.sendDone)
	}
	return b, nil
}

func (b *Bridge) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *Bridge) setErr(s string) { b.lastErr.Store(&s) }

// logOften logs at most once a second.
func (b *Bridge) logOften(format string, args ...any) {
	now := time.Now().UnixNano()
	if last := b.lastLog.Load(); now-last < int64(time.Second) || !b.lastLog.CompareAndSwap(last, now) {
		return
	}
	b.logf(format, args...)
}

// pump moves exported events from the bus into the buffer.
func (b *Bridge) pump() {
	defer close(b.pumpDone)
	for {
		e, err := b.out.Next(b.ctx)
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.n == len(b.ring) { // full: the oldest makes room
			b.ring[b.head] = events.Event{}
			b.head = (b.head + 1) % len(b.ring)
			b.n--
			b.lost.Add(1)
		}
		b.ring[(b.head+b.n)%len(b.ring)] = e
		b.n++
		b.mu.Unlock()
		b.signal()
	}
}

// take removes the oldest buffered event and marks it in flight.
func (b *Bridge) take() (events.Event, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		return events.Event{}, false
	}
	e := b.ring[b.head]
	b.ring[b.head] = events.Event{}
	b.head = (b.head + 1) % len(b.ring)
	b.n--
	b.inflight = 1
	return e, true
}

// done ends the flight of the taken event: counted by count, or put back
// at the front of the buffer (when the buffer filled meanwhile, it is the
// oldest, and lost).
func (b *Bridge) done(e *events.Event, count *atomic.Uint64, putBack bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight = 0
	if !putBack {
		count.Add(1)
		return
	}
	if b.n == len(b.ring) {
		b.lost.Add(1)
		return
	}
	b.head = (b.head - 1 + len(b.ring)) % len(b.ring)
	b.ring[b.head] = *e
	b.n++
}

// send hands buffered events to the connection, in order, while it is up.
func (b *Bridge) send() {
	defer close(b.sendDone)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if b.nc.IsConnected() {
			if e, ok := b.take(); ok {
				if b.publish(&e) {
					continue
				}
				// Not sent: wait for the connection to come back.
				select {
				case <-b.ctx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
		}
		select {
		case <-b.ctx.Done():
			return
		case <-b.wake:
		case <-tick.C:
		}
	}
}

// publish sends one event; false when it was put back for the next
// connection.
func (b *Bridge) publish(e *events.Event) bool {
	if !e.Deadline.IsZero() && time.Now().After(e.Deadline) {
		b.done(e, &b.expired, false)
		return true
	}
	data, err := encode(e)
	if err != nil {
		b.setErr(fmt.Sprintf("encode %s: %v", e.Topic, err))
		b.done(e, &b.lost, false)
		return true
	}
	err = b.nc.Publish(Subject(b.cfg.Host, e.Topic), data)
	switch {
	case err == nil:
		b.done(e, &b.sent, false)
	case errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject):
		b.setErr(fmt.Sprintf("send %s: %v", e.Topic, err))
		b.logOften("bridge: send %s: %v (lost)", e.Topic, err)
		b.done(e, &b.lost, false)
	default: // not connected (any more): keep it for the next connection
		b.done(e, nil, true)
		return false
	}
	return true
}

// Flush waits until the server has processed everything this bridge sent
// so far, its subscriptions included.
func (b *Bridge) Flush(timeout time.Duration) error {
	if err := b.nc.FlushTimeout(timeout); err != nil {
		return fmt.Errorf("bridge: flush: %w", err)
	}
	return nil
}

// receive takes one message from another host.
func (b *Bridge) receive(m *nats.Msg) {
	e, host, err := decode(m.Subject, m.Data)
	if err == nil && host == b.cfg.Host {
		err = fmt.Errorf("another host calls itself %q, as this one does", host)
	}
	if err == nil {
		err = events.ValidateEvent(&e)
	}
	if err != nil {
		b.refused.Add(1)
		msg := fmt.Sprintf("refused %s: %v", m.Subject, err)
		b.setErr(msg)
		b.logOften("bridge: %s", msg)
		return
	}
	if b.in != nil {
		if ok, err := b.in.Match(&e); err != nil || !ok {
			b.filtered.Add(1)
			return
		}
	}
	b.bus.Publish(e)
	b.received.Add(1)
}

// Stats returns the bridge's counters.
func (b *Bridge) Stats() Stats {
	st := Stats{URL: b.cfg.URL, Host: b.cfg.Host, Connected: b.nc.IsConnected(), Reconnects: b.reconnects.Load()}
	if st.Connected {
		st.Server = b.nc.ConnectedUrlRedacted()
	}
	b.mu.Lock()
	st.Buffered = uint64(b.n + b.inflight)
	st.Sent, st.Lost, st.Expired = b.sent.Load(), b.lost.Load(), b.expired.Load()
	b.mu.Unlock()
	if b.out != nil {
		s := b.out.Stats()
		st.Buffered += uint64(s.Queued)
		st.Lost += s.Dropped
		st.Expired += s.Expired
		st.FilterErrors = s.FilterErrors
	}
	st.Received, st.Refused, st.Filtered = b.received.Load(), b.refused.Load(), b.filtered.Load()
	for _, s := range b.nsubs {
		if d, err := s.Dropped(); err == nil {
			st.Dropped += uint64(d)
		}
	}
	if p := b.lastErr.Load(); p != nil {
		st.LastError = *p
	}
	return st
}

// Config returns the settings the bridge runs with.
func (b *Bridge) Config() lane.Bridge { return b.cfg }

// Close stops the bridge: while the server is reachable, what is buffered
// is sent (for at most Options.DrainTimeout); the rest is counted as lost
// and logged; then the connection is closed. It returns the final
// counters.
func (b *Bridge) Close() Stats {
	b.closeOnce.Do(func() {
		b.closing.Store(true)
		if b.out != nil {
			b.out.Close() // the pump drains the queue into the buffer, then ends
			<-b.pumpDone
			deadline := time.Now().Add(b.opts.DrainTimeout)
			for time.Now().Before(deadline) {
				b.mu.Lock()
				left := b.n + b.inflight
				b.mu.Unlock()
				if left == 0 || !b.nc.IsConnected() {
					break // all sent, or no server to send them to
				}
				b.signal()
				time.Sleep(5 * time.Millisecond)
			}
		}
		b.cancel()
		<-b.sendDone
		b.mu.Lock()
		if b.n > 0 {
			b.logf("bridge: stopping with %d events unsent (counted lost)", b.n)
			b.lost.Add(uint64(b.n))
			b.n = 0
		}
		b.mu.Unlock()
		for _, s := range b.nsubs {
			s.Unsubscribe()
		}
		if b.nc.IsConnected() {
			b.nc.FlushTimeout(time.Second)
		}
	})
	st := b.Stats()
	b.nc.Close()
	st.Connected, st.Server = false, ""
	return st
}

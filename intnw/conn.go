package intnw

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Path is one network a multi-socket may use: the local address to send
// from (and, optionally, the interface to bind to) and the peer's address
// reached through it.
type Path struct {
	// Name is what status and events call the path ("wifi", "cellular").
	Name string
	// Local is the source address (policy routing by source picks the
	// network); zero: the kernel's choice.
	Local netip.Addr
	// Device binds the path's socket to an interface (SO_BINDTODEVICE).
	Device string
	// Remote is the peer's address through this network.
	Remote netip.AddrPort
	// Bandwidth is the path's bandwidth in bit/s until the kernel has
	// measured it (0: 1 Mbit/s).
	Bandwidth float64
}

// Options tune a multi-socket; the zero value is the defaults.
type Options struct {
	// UserTimeout is how long a path's socket may hold unacknowledged
	// data before the path is taken for gone (TCP_USER_TIMEOUT); 0: 5s.
	UserTimeout time.Duration
	// Redial is how often a client retries a path that is down; 0: 1s.
	Redial time.Duration
	// Linger is how long a multi-socket lives with no path before it
	// fails; 0: 30s.
	Linger time.Duration
	// SendBuffer bounds the bytes written and not yet acknowledged by the
	// peer: Write waits beyond it; 0: 8 MiB.
	SendBuffer int
	// RecvBuffer bounds the bytes received and not yet delivered: the
	// paths stop being read beyond it; 0: 16 MiB.
	RecvBuffer int
	// BackgroundLargeMin defers bg-large IROBs begun with a thunk while no
	// path has this bandwidth (bit/s); 0: any path will do.
	BackgroundLargeMin float64
	// BackgroundBacklog also defers a background IROB begun with a
	// thunk while the IROBs of its label already waiting in the
	// multi-socket (not yet in a path's socket) would take longer than
	// this to send at the usable paths' estimated bandwidth: the data
	// could not go now, and an application that gave a thunk would rather
	// hear so than queue it (the seed's vehicular sensor drops a reading
	// that cannot go before the next one). 0: 1s; negative: only the lack
	// of a suitable path defers.
	BackgroundBacklog time.Duration
	// Namespace is the network namespace (a path such as
	// /run/netns/NAME) whose networks the multi-socket uses: a client's
	// paths are dialled and its addresses watched there, a listener
	// listens there. "": the caller's.
	Namespace string
	// ProbeSize is the most padding one bandwidth probe sends (the
	// connection scout's active measurement): a path is probed when it
	// comes up and again after ProbeIdle without a measurement, while it
	// carries nothing, and its socket's delivery rate over the probe is
	// its bandwidth sample. A probe is at most what the path's estimate
	// sends in 250 ms (at least 16 KiB), so that foreground written just
	// after waits little behind it, and on the path of least round trip
	// among several at most its pipe and what it sends in
	// AnticipateMin. 0: 64 KiB; negative: no probes
	// (bandwidth from traffic and the hint only).
	ProbeSize int
	// ProbeIdle is how long a path may go without a bandwidth
	// measurement before an idle one is probed again; 0: 30s.
	ProbeIdle time.Duration
	// OnPath is told of each path's state when it comes up or goes down.
	OnPath func(PathStatus)
	// Logf logs what the multi-socket does with its paths.
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.UserTimeout, 5*time.Second)
	def(&o.Redial, time.Second)
	def(&o.Linger, 30*time.Second)
	def(&o.ProbeIdle, 30*time.Second)
	if o.BackgroundBacklog == 0 {
		o.BackgroundBacklog = time.Second
	}
	if o.ProbeSize == 0 {
		o.ProbeSize = 64 << 10
	}
	o.ProbeSize = min(o.ProbeSize, maxProbe)
	if o.SendBuffer <= 0 {
		o.SendBuffer = 8 << 20
	}
	if o.RecvBuffer <= 0 {
		o.RecvBuffer = 16 << 20
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// The anticipatory bound on background data a path's socket may hold:
// what the path sends in AnticipateMin right after foreground traffic,
// growing with the time since to AnticipateMax.
const (
	AnticipateMin      = 50 * time.Millisecond
	AnticipateMax      = time.Second
	AnticipateDoubling = time.Second
	// sampleEvery is how often the paths' sockets are read (TCP_INFO).
	sampleEvery = 50 * time.Millisecond
	// probeEvery is how often a path is pinged.
	probeEvery = 250 * time.Millisecond
	// stallMin is the least time a ping may wait for its pong before its
	// path is taken for stalled.
	stallMin = 500 * time.Millisecond
	// maxPaths bounds the paths of one multi-socket.
	maxPaths = 64
	// handshakeTimeout bounds a path's hello and welcome.
	handshakeTimeout = 5 * time.Second
	// defaultBandwidth is a path's bandwidth before it is known (bytes/s).
	defaultBandwidth = 1e6 / 8
	// upGain is the factor on a path's pipe while its bandwidth is
	// probed upward (bwProbeLocked), for upRounds round trips, upCycle
	// round trips (at least upCycleMin) after the last probe.
	upGain = 1.1
	// upGainGrowing is the factor in a probe that follows one that
	// raised the estimate: the path had room, and a low estimate comes up
	// in fewer probes.
	upGainGrowing = 1.25
	// upGainRecover is the factor in a probe of a path whose estimate
	// has fallen below recoverBelow of the highest it held within
	// peakHold (a cellular link's slow spell or stall takes the estimate
	// down, and probes at upGain bring it back a tenth at a time, eight
	// round trips a probe): as BBR's start-up does, it doubles while it
	// finds more, up to that peak.
	upGainRecover = 2.0
	recoverBelow  = 0.5
	// recoverRTT: a recovering probe starts only while the path's round
	// trip is within this many times its least (not in a stall, where it
	// finds nothing and queues ahead of the foreground), and counts a
	// pipe of the round trip up to that.
	recoverRTT = 2.0
	// peakHold is how long the highest measured estimate counts: the
	// UMTS trace's slow spells last over a minute.
	peakHold   = 2 * time.Minute
	upRounds   = 8
	upCycle    = 16
	upCycleMin = 2 * time.Second
	// upGrowth: a probe that raised the estimate this much over where it
	// started is followed by another at once (the path may be faster
	// still). It is judged over the whole probe, not a span: the bound
	// sends a little under the estimate's pipe, so each span of a probe
	// at upGain shows about 4.5 % more than the last, short of upGrowth,
	// while the spans together show more.
	upGrowth = 1.05
	// upBackoff bounds the doubling of the cycle after probes that
	// found no more bandwidth.
	upBackoff = 3
	// upQuiet: no probe upward within this of foreground on the path
	// (more may follow, as the anticipatory bound expects).
	upQuiet = 2 * time.Second
	// upSpan is the least span a probe's rate is measured over.
	upSpan = time.Second
	// probeQuiet: no bandwidth probe (the scout's) on a path whose peer
	// sent data on it this lately.
	probeQuiet = 2 * time.Second
)

// Errors of a multi-socket.
var (
	// ErrClosed: the multi-socket was closed, here or by the peer.
	ErrClosed = errors.New("intnw: multi-socket closed")
	// ErrNoPath: no path came back within Options.Linger.
	ErrNoPath = errors.New("intnw: no path to the peer")
)

// DeferredError is Begin's answer when no path suits the label: the IROB
// was not begun, and the thunk given is called when one does.
type DeferredError struct {
	Label Label
	t     *thunk
	c     *Conn
}

func (e *DeferredError) Error() string {
	return fmt.Sprintf("intnw: no path suits %v now: deferred until one does", e.Label)
}

// Cancel withdraws the thunk; it reports whether the thunk had not yet
// been called.
func (e *DeferredError) Cancel() bool {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	if e.t.done {
		return false
	}
	e.t.done = true
	return true
}

type thunk struct {
	fn   func()
	done bool
}

// PathStatus is a path's state and measurements.
type PathStatus struct {
	Index         int
	Name          string
	Local, Remote string
	Up            bool
	// Stalled: up, but its pings go unanswered (the network holds its
	// packets); it carries nothing new until they are answered.
	Stalled bool
	// RTT is the filtered smoothed round trip of the path's socket.
	RTT time.Duration
	// Bandwidth is the filtered delivery rate in bit/s (the path's hint
	// until measured).
	Bandwidth float64
	// Measured: Bandwidth comes from the socket's delivery rate (traffic
	// or a probe), not only from the hint. Probes counts the probes sent.
	Measured bool
	Probes   int
	// UpProbes counts the probes upward of the estimate: spells of a
	// pipe counted larger while background waits, whose deliveries
	// raise the estimate if the path carried more.
	UpProbes int
	// Queued is the bytes in the socket not yet acknowledged.
	Queued int
	// Sent and Received count the bytes of frames each way.
	Sent, Received uint64
	// Retransmits counts the segments the path's socket sent again.
	Retransmits uint32
	// Err is why the path last went down; DialErr why the last attempt
	// to bring it back failed.
	Err, DialErr string
}

// Conn is a multi-socket: one end of a logical connection over paths.
type Conn struct {
	opts   Options
	client bool
	id     [16]byte

	mu       sync.Mutex
	recvCond *sync.Cond // a message may be deliverable, or room to receive
	sendCond *sync.Cond // room to send, or everything acknowledged
	paths    []*pathState
	snd      *sender
	rcv      *receiver
	thunks   [numLabels][]*thunk
	err      error // why the multi-socket ended
	closing  bool
	// peerClosed: the peer sent close; what came before is still delivered.
	peerClosed  bool
	noPathSince time.Time
	dialing     map[int]bool
	redial      chan struct{} // a path's address came back: dial now
	done        chan struct{}
	lis         *Listener
}

type pathState struct {
	idx   int
	cfg   Path
	tc    *net.TCPConn
	gen   int
	up    bool
	wake  chan struct{}
	stop  chan struct{}
	wrote chan struct{} // closed when the writer of this connection returns
	ctrl  []*frame
	// acks acknowledge the chunks received on this path. They go back on
	// it: were the path lost, the chunks would be sent again over another
	// and acknowledged there (an ack on another path could be lost with
	// that path while the chunk's own path lives on).
	acks  []ackEntry
	fgOut int // foreground chunks in flight on the path
	// lastFG is when the path last took foreground: its background is
	// bounded by the time since (anticipationLocked). Foreground on
	// another network does not queue behind this one's background.
	lastFG  time.Time
	lat, bw flipFlop
	minRTT  time.Duration // the socket's least RTT (TCP_INFO)
	// Probing: a ping goes out every probeEvery; a path whose ping has
	// waited longer than stallAfter for its pong is stalled (the network
	// holds its packets: out of range, not yet gone) and carries nothing
	// new until a pong comes.
	pingSent time.Time // of the outstanding ping (zero: none)
	pingSeq  uint32
	lastPong time.Time
	stalled  bool
	// The scout's bandwidth probes: when the path last had a delivery
	// rate sample that its sender did not limit, and when it was probed.
	measuredAt, probedAt time.Time
	probes               int
	ups                  int         // bandwidth probes upward (bwProbeLocked)
	delivered            uint32      // TCP_INFO's, at the last sample
	bytesAcked           uint64      // TCP_INFO's, at the last sample
	rate                 float64     // TCP_INFO's delivery rate, at the last sample
	fill                 segmentFill // of the segments delivered lately
	statsRead            bool        // the counters above are this socket's
	busySince            time.Time   // start of the standing queue being measured
	busyAcked            uint64      // bytes acknowledged then
	// The probe upward of the bandwidth estimate (bwProbeLocked): when
	// the bound last held background back, until when the pipe counts
	// upGain times, and when the next such probe may start; then the
	// round trip whose acknowledgements measure it, from upFrom with
	// upAcked acknowledged.
	heldAt, upUntil, nextUp, upFrom time.Time
	upRTT                           time.Duration
	upAcked                         uint64
	upBase                          float64   // the estimate when the probe started
	upGrew                          bool      // the probe raised the estimate upGrowth over upBase
	upChain                         bool      // the probe follows one that did (upGainGrowing)
	upGainNow                       float64   // the pipe's factor in this probe
	upRecover                       bool      // the probe recovers a fallen estimate (upGainRecover)
	peakBW                          float64   // the highest estimate measured within peakHold
	peakAt                          time.Time // when it was
	upFlat                          uint      // probes in a row that did not
	upPaths                         int       // usable paths when last looked
	peerDataAt                      time.Time // when the peer's data (or probe) last came on the path
	outq                            int
	retrans                         uint32 // the socket's segments sent again, as last read
	sent                            uint64
	received                        uint64
	lastErr                         error
	dialErr                         string // the last redial's failure, logged once
}

func newConn(opts Options, client bool, id [16]byte) *Conn {
	c := &Conn{opts: opts.withDefaults(), client: client, id: id, snd: newSender(), rcv: newReceiver(),
		dialing: map[int]bool{}, redial: make(chan struct{}, 1), done: make(chan struct{}), noPathSince: time.Now()}
	c.recvCond = sync.NewCond(&c.mu)
	c.sendCond = sync.NewCond(&c.mu)
	go c.sampler()
	return c
}

func (c *Conn) path(idx int) *pathState {
	for len(c.paths) <= idx {
		c.paths = append(c.paths, &pathState{idx: len(c.paths), wake: make(chan struct{}, 1)})
	}
	return c.paths[idx]
}

// attach makes tc path idx's connection (replacing one it had) and starts
// reading and writing it.
func (c *Conn) attach(idx int, tc *net.TCPConn, cfg Path) error {
	c.mu.Lock()
	if c.err != nil || c.closing {
		c.mu.Unlock()
		tc.Close()
		if c.err != nil {
			return c.err
		}
		return ErrClosed
	}
	p := c.path(idx)
	if p.up {
		c.downLocked(p, errors.New("replaced by a new connection"), false)
	}
	p.cfg, p.tc, p.up, p.lastErr = cfg, tc, true, nil
	p.gen++
	p.stop, p.wrote = make(chan struct{}), make(chan struct{})
	p.pingSent, p.lastPong, p.stalled = time.Time{}, time.Time{}, false
	// A new connection (a network joined again, maybe another hotspot)
	// is measured afresh: probed when idle unless its traffic is first.
	p.probedAt, p.measuredAt = time.Time{}, time.Time{}
	p.statsRead, p.fill, p.delivered, p.bytesAcked, p.rate = false, segmentFill{}, 0, 0, 0
	p.busySince, p.busyAcked = time.Time{}, 0
	// A new socket's counters start again: no probe spans the two.
	p.upUntil, p.upFrom, p.upAcked, p.upGrew, p.upChain = time.Time{}, time.Time{}, 0, false, false
	p.peakBW, p.peakAt = 0, time.Time{}
	if p.bw.n == 0 {
		bw := defaultBandwidth
		if cfg.Bandwidth > 0 {
			bw = cfg.Bandwidth / 8
		}
		p.bw.add(bw)
	}
	gen, stop, wrote := p.gen, p.stop, p.wrote
	c.noPathSince = time.Time{}
	st := c.statusLocked(p)
	c.fireThunksLocked()
	c.kickLocked()
	c.mu.Unlock()
	c.opts.Logf("path %s up: %s → %s", st.Name, st.Local, st.Remote)
	if c.opts.OnPath != nil {
		c.opts.OnPath(st)
	}
	go c.reader(p, tc, gen)
	go c.writer(p, tc, gen, stop, wrote)
	return nil
}

// downLocked takes path p down: its connection closed, what it had in
// flight queued again for the other paths, and (tell) the peer told over
// another path.
func (c *Conn) downLocked(p *pathState, why error, tell bool) {
	if !p.up {
		return
	}
	p.up = false
	p.lastErr = why
	close(p.stop)
	p.tc.Close()
	n := c.snd.requeue(p.idx)
	p.fgOut = 0
	p.acks, p.ctrl = nil, nil
	if tell && c.err == nil {
		if q := c.fastestLocked(); q != nil {
			q.ctrl = append(q.ctrl, &frame{typ: tPathDown, aux: uint32(p.idx)})
		}
	}
	if c.fastestLocked() == nil {
		c.noPathSince = time.Now()
	}
	c.kickLocked()
	st := c.statusLocked(p)
	c.opts.Logf("path %s down (%v): %d chunks to send again", st.Name, why, n)
	if c.opts.OnPath != nil {
		go c.opts.OnPath(st)
	}
}

// failLocked ends the multi-socket with err.
func (c *Conn) failLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	for _, p := range c.paths {
		if p.up {
			c.downLocked(p, err, false)
		}
	}
	close(c.done)
	c.recvCond.Broadcast()
	c.sendCond.Broadcast()
	if c.lis != nil {
		go c.lis.forget(c)
	}
}

func (c *Conn) kickLocked() {
	for _, p := range c.paths {
		kick(p)
	}
}

// kick wakes p's writer.
func kick(p *pathState) {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// livePaths are the paths up.
func (c *Conn) liveLocked() []*pathState {
	var out []*pathState
	for _, p := range c.paths {
		if p.up {
			out = append(out, p)
		}
	}
	return out
}

// usablePathsLocked are the live paths not stalled, or all live paths if
// every one is.
func (c *Conn) usablePathsLocked() []*pathState {
	live := c.liveLocked()
	var out []*pathState
	for _, p := range live {
		if !p.stalled {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return live
	}
	return out
}

// fastestLocked is the usable path of least latency (nil: none).
func (c *Conn) fastestLocked() *pathState { return fastest(c.usablePathsLocked()) }

// widestLocked is the usable path of most bandwidth (nil: none).
func (c *Conn) widestLocked() *pathState { return widest(c.usablePathsLocked()) }

// fastest is the path of ps with the least latency (nil: none).
func fastest(ps []*pathState) *pathState {
	var best *pathState
	for _, p := range ps {
		if best == nil || p.lat.value() < best.lat.value() {
			best = p
		}
	}
	return best
}

// widest is the path of ps with the most bandwidth (nil: none).
func widest(ps []*pathState) *pathState {
	var best *pathState
	for _, p := range ps {
		if best == nil || p.bw.value() > best.bw.value() {
			best = p
		}
	}
	return best
}

// anticipationLocked is how long the background data path p holds may
// take to send now: AnticipateMin right after foreground traffic on p (or
// foreground written while p is the path for its label), doubling every
// AnticipateDoubling without any, up to AnticipateMax. (The seed gives the
// two ends, not the growth: doubling reaches a second after 4.3 s, so
// foreground that comes every second or two, as urgent messages in bursts
// do, finds little background ahead of it.)
func anticipationLocked(p *pathState, now time.Time) time.Duration {
	since := now.Sub(p.lastFG)
	if since <= 0 {
		return AnticipateMin
	}
	w := float64(AnticipateMin) * math.Exp2(float64(since)/float64(AnticipateDoubling))
	return time.Duration(min(w, float64(AnticipateMax)))
}

// baseRTT is p's round trip without queueing: its socket's least RTT,
// else the filtered smoothed one (0 before any sample).
func baseRTT(p *pathState) time.Duration {
	if p.minRTT > 0 {
		return p.minRTT
	}
	return time.Duration(p.lat.value() * float64(time.Second))
}

// bandwidth is p's filtered bandwidth in bytes/s (its hint, or
// defaultBandwidth, until measured).
func bandwidth(p *pathState) float64 {
	if bw := p.bw.value(); bw > 0 {
		return bw
	}
	return defaultBandwidth
}

// arrival estimates when n bytes written on p now reach the peer, with
// outq bytes in its socket: half the base round trip, and the time the
// path takes to send what the socket holds beyond its pipe (the
// bandwidth-delay product: in flight, not ahead in a queue) and the n
// bytes.
func arrival(p *pathState, outq, n int) time.Duration {
	bw := bandwidth(p)
	rtt := baseRTT(p)
	ahead := max(0, float64(outq)-bw*rtt.Seconds())
	return rtt/2 + time.Duration((ahead+float64(n))/bw*float64(time.Second))
}

// fgPathLocked chooses the path for n bytes of foreground with label l:
// for small, the usable path that would deliver them soonest with what
// its socket holds now (the smoothed round trip of a socket counts the
// background it carries, which foreground passes in the library's queue,
// and lags); for large, the widest. nil: no path.
func (c *Conn) fgPathLocked(l Label, n int) *pathState {
	usable := c.usablePathsLocked()
	if l&Large != 0 {
		return widest(usable)
	}
	var best *pathState
	var bestAt time.Duration
	for _, p := range usable {
		at := arrival(p, socketQueue(p.tc), n)
		if best == nil || at < bestAt {
			best, bestAt = p, at
		}
	}
	return best
}

// calmest is the path of ps with the least base round trip: the one a
// small foreground message takes when nothing is queued (nil: none).
func calmest(ps []*pathState) *pathState {
	var best *pathState
	for _, p := range ps {
		if best == nil || baseRTT(p) < baseRTT(best) {
			best = p
		}
	}
	return best
}

// minPiece is the least background a path takes at once: about a
// segment, so that a piece cut to fit the anticipatory bound is worth its
// frame.
const minPiece = 1400

// bgRoomLocked says how many bytes of background path p may take now
// under its anticipatory bound (0: none, wait) and the bound's window:
// what its socket may hold is its pipe (the bandwidth-delay product: in
// flight, not ahead of a foreground message) and what the path sends in
// the window. An empty socket takes at least minPiece.
//
// The window grows as the seed's (anticipationLocked) only on the widest
// of the usable paths, and only when it is not the calmest: the next
// small foreground message goes to the calmest and waits behind whatever
// background its socket holds (the first one of a burst after a quiet
// spell would wait behind up to AnticipateMax of it), and a narrower path
// gains little throughput from a deep queue while its backlog is what
// foreground waits behind when the calmest path vanishes and it becomes
// the calmest. The others keep AnticipateMin.
func (c *Conn) bgRoomLocked(p *pathState, usable []*pathState, now time.Time) (int, time.Duration) {
	window := bgWindow(p, usable, now)
	return roomWithin(p, window), window
}

// bgWindow is the time's worth of background path p's bound lets its
// socket hold beyond its pipe (bgRoomLocked).
func bgWindow(p *pathState, usable []*pathState, now time.Time) time.Duration {
	if p != calmest(usable) && p == widest(usable) {
		return anticipationLocked(p, now)
	}
	return AnticipateMin
}

// roomWithin is the background path p may take now if its socket may hold
// its pipe and what it sends in window (0: none); an empty socket takes
// at least minPiece.
func roomWithin(p *pathState, window time.Duration) int {
	p.outq = socketQueue(p.tc)
	pipe := baseRTT(p).Seconds()
	if !p.upUntil.IsZero() {
		if p.upRecover {
			// A link whose round trip swings (a cellular one serves
			// in bursts) needs its round trip's worth, not its least
			// one's, to show its rate; at most recoverRTT times the
			// least: a longer one is a stall or a queue, and what a
			// probe queues then delays the next foreground message.
			pipe = max(pipe, min(p.lat.value(), recoverRTT*pipe))
		}
		pipe *= p.upGainNow
	}
	limit := int(bandwidth(p) * (pipe + window.Seconds()))
	room := limit - p.outq
	if p.outq == 0 {
		room = max(room, minPiece)
	}
	if room < minPiece {
		return 0
	}
	return room
}

// pickLocked takes the next chunk path p sends, if any, and says when to
// look again if background data waits for the anticipatory bound or for
// another path.
//
// Foreground goes on the path chosen for it when it was written (again
// the best now, if that path is no longer usable). Background goes on the
// paths not carrying foreground, each piece at most what the path's
// anticipatory bound leaves room for (bgRoomLocked); the calmest of
// several paths takes it only while the others hold more than their pipe
// and AnticipateMin (otherHasRoomLocked), so that its socket stays clear
// for the next small foreground message when the others can carry the
// background without a backlog, and adds its bandwidth when they cannot.
func (c *Conn) pickLocked(p *pathState, now time.Time) (*chunk, time.Duration) {
	usable := c.usablePathsLocked()
	if !slices.Contains(usable, p) {
		return nil, 0 // stalled while another path answers
	}
	for _, l := range []Label{FGSmall, FGLarge} {
		if !c.snd.queued(l) {
			continue
		}
		head := c.snd.queues[l][0]
		if head.want < 0 || head.want >= len(c.paths) || !slices.Contains(usable, c.paths[head.want]) {
			if w := c.fgPathLocked(l, len(head.data)); w != nil {
				head.want = w.idx
			}
		}
		if head.want != p.idx {
			continue
		}
		ch := c.snd.take(l, p.idx, 0)
		p.fgOut++
		p.lastFG = now
		return ch, 0
	}
	if p.fgOut > 0 && len(usable) > 1 {
		return nil, 0
	}
	calm := len(usable) > 1 && p == calmest(usable)
	for _, l := range []Label{BGSmall, BGLarge} {
		if !c.snd.queued(l) {
			continue
		}
		room, window := c.bgRoomLocked(p, usable, now)
		if p.fgOut > 0 {
			// The sole path keeps its pipe busy while foreground is in
			// flight, with nothing queued: held back altogether, it would
			// empty, and the gap its idle link leaves in the flight comes
			// back each round trip as the acknowledgements clock the
			// background out, with as much more queued ahead of the next
			// message as the gap was long.
			room, window = roomWithin(p, 0), 0
		}
		if room == 0 {
			p.heldAt = now
			return nil, max(window/10, 2*time.Millisecond)
		}
		if calm && c.otherHasRoomLocked(p, usable) {
			// The others take it; look again in case they fill up.
			return nil, AnticipateMin / 5
		}
		return c.snd.take(l, p.idx, room), 0
	}
	return nil, 0
}

// otherHasRoomLocked says whether a usable path other than p, carrying no
// foreground, may take background now within its pipe and AnticipateMin:
// one whose window has grown (the widest) may hold more, but a backlog
// beyond that is background the calm path would deliver sooner.
func (c *Conn) otherHasRoomLocked(p *pathState, usable []*pathState) bool {
	for _, q := range usable {
		if q == p || q.fgOut > 0 {
			continue
		}
		if roomWithin(q, AnticipateMin) > 0 {
			return true
		}
	}
	return false
}

// probePad is a probe's padding.
var probePad = make([]byte, maxProbe)

// probeLocked says how many bytes of padding idle path p sends now to
// measure its bandwidth (0: none): when the path has not been measured
// since it came up, or not for ProbeIdle, nothing waits to be sent on
// any path, its socket is empty, it is usable, and the peer has sent no
// data on it for probeQuiet (the seed's scout probes while no data
// flows); at most what its
// estimate sends in 250 ms, at least 16 KiB, at most ProbeSize, and on the
// calmest of several paths at most its pipe and what it sends in
// AnticipateMin.
func (c *Conn) probeLocked(p *pathState, now time.Time) int {
	if c.opts.ProbeSize <= 0 || c.closing || p.stalled || !p.up {
		return 0
	}
	last := p.measuredAt
	if p.probedAt.After(last) {
		last = p.probedAt
	}
	if !last.IsZero() && now.Sub(last) < c.opts.ProbeIdle {
		return 0 // measured by its traffic or a probe lately
	}
	for _, l := range []Label{FGSmall, FGLarge, BGSmall, BGLarge} {
		if c.snd.queued(l) {
			return 0
		}
	}
	if !p.peerDataAt.IsZero() && now.Sub(p.peerDataAt) < probeQuiet {
		// The peer's data flows on the path: the probe would queue
		// ahead of the acknowledgements that clock it, and the peer's
		// bound would take the delay for a queue of its own.
		return 0
	}
	usable := c.usablePathsLocked()
	if !slices.Contains(usable, p) || socketQueue(p.tc) > 0 {
		return 0
	}
	n := min(max(int(p.bw.value()/4), 16<<10), c.opts.ProbeSize)
	if len(usable) > 1 && p == calmest(usable) {
		// The next small foreground message comes here: a probe is
		// background to it, held to the calm path's bound. (A sole path
		// is probed in full: a probe held to a low estimate would not
		// measure it.)
		n = min(n, roomWithin(p, AnticipateMin))
	}
	p.probedAt = now
	p.probes++
	return n
}

// fillLocked appends what path p writes next: its control frames, its
// acknowledgements, and a chunk.
func (c *Conn) fillLocked(p *pathState, b []byte, now time.Time) ([]byte, time.Duration) {
	for _, f := range p.ctrl {
		b = appendFrame(b, f)
	}
	p.ctrl = p.ctrl[:0]
	var ping time.Duration
	if p.pingSent.IsZero() {
		if since := now.Sub(p.lastPong); since >= probeEvery {
			p.pingSeq++
			p.pingSent = now
			b = appendFrame(b, &frame{typ: tPing, id: uint64(now.UnixNano()), aux: p.pingSeq})
		} else {
			ping = probeEvery - since
		}
	}
	for len(p.acks) > 0 {
		n := min(len(p.acks), maxAcks)
		b = appendFrame(b, &frame{typ: tAck, acks: p.acks[:n]})
		p.acks = p.acks[n:]
	}
	p.acks = nil
	if c.closing {
		return b, 0
	}
	ch, retry := c.pickLocked(p, now)
	if ch != nil {
		b = appendFrame(b, ch.frame())
	} else if n := c.probeLocked(p, now); n > 0 {
		b = appendFrame(b, &frame{typ: tProbe, data: probePad[:n]})
	}
	if ping > 0 && (retry == 0 || ping < retry) {
		retry = ping
	}
	return b, retry
}

func (c *Conn) writer(p *pathState, tc *net.TCPConn, gen int, stop, wrote chan struct{}) {
	defer close(wrote)
	buf := make([]byte, 0, 128<<10)
	var timer *time.Timer
	for {
		c.mu.Lock()
		if p.gen != gen || !p.up {
			c.mu.Unlock()
			return
		}
		var retry time.Duration
		buf, retry = c.fillLocked(p, buf[:0], time.Now())
		closing := c.closing
		c.mu.Unlock()
		if len(buf) == 0 {
			if closing {
				return
			}
			var tick <-chan time.Time
			if retry > 0 {
				if timer == nil {
					timer = time.NewTimer(retry)
				} else {
					timer.Reset(retry)
				}
				tick = timer.C
			}
			select {
			case <-p.wake:
			case <-tick:
			case <-stop:
				return
			}
			continue
		}
		n, err := tc.Write(buf)
		c.mu.Lock()
		p.sent += uint64(n)
		if err != nil && p.gen == gen {
			c.downLocked(p, fmt.Errorf("write: %w", err), true)
		}
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (c *Conn) reader(p *pathState, tc *net.TCPConn, gen int) {
	br := bufio.NewReaderSize(tc, 64<<10)
	for {
		f, err := readFrame(br)
		c.mu.Lock()
		if p.gen != gen || !p.up {
			c.mu.Unlock()
			return
		}
		if err != nil {
			var pe *ProtocolError
			switch {
			case errors.As(err, &pe):
				c.refuseLocked(p, err)
			case c.peerClosed, c.closing:
				c.downLocked(p, ErrClosed, false)
			default:
				if errors.Is(err, io.EOF) {
					err = errors.New("the peer closed the path")
				}
				c.downLocked(p, fmt.Errorf("read: %w", err), true)
			}
			c.mu.Unlock()
			return
		}
		p.received += uint64(f.wireSz)
		c.handleLocked(p, f)
		for c.rcv.buffered > c.opts.RecvBuffer && c.err == nil && p.gen == gen && p.up {
			c.recvCond.Wait()
		}
		c.mu.Unlock()
	}
}

// refuseLocked ends the multi-socket for a frame the peer should not have
// sent, telling it why.
func (c *Conn) refuseLocked(p *pathState, err error) {
	msg := err.Error()
	if len(msg) > maxText {
		msg = msg[:maxText]
	}
	// Written directly: the writer may be blocked, and the path ends here.
	_ = p.tc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = p.tc.Write(appendFrame(nil, &frame{typ: tError, data: []byte(msg)}))
	c.failLocked(err)
}

func (c *Conn) handleLocked(p *pathState, f *frame) {
	switch f.typ {
	case tData:
		if err := c.rcv.chunk(f); err != nil {
			c.refuseLocked(p, err)
			return
		}
		p.acks = append(p.acks, ackEntry{ID: f.id, Off: f.off, Len: uint32(len(f.data))})
		p.peerDataAt = time.Now()
		kick(p)
		c.recvCond.Broadcast()
	case tAck:
		for _, a := range f.acks {
			ch := c.snd.ack(a)
			if ch != nil && ch.ir.label.Foreground() && ch.path < len(c.paths) && c.paths[ch.path].fgOut > 0 {
				c.paths[ch.path].fgOut--
			}
		}
		c.sendCond.Broadcast()
		c.kickLocked()
	case tPing:
		p.ctrl = append(p.ctrl, &frame{typ: tPong, id: f.id, aux: f.aux})
		kick(p)
	case tProbe:
		// Padding: counted in Received, nothing more.
		p.peerDataAt = time.Now()
	case tPong:
		if f.aux == p.pingSeq && !p.pingSent.IsZero() {
			p.pingSent = time.Time{}
			p.lastPong = time.Now()
			if p.stalled {
				p.stalled = false
				c.opts.Logf("path %s answers again", c.statusLocked(p).Name)
				c.kickLocked()
			}
			kick(p)
		}
	case tPathDown:
		if int(f.aux) < len(c.paths) && int(f.aux) != p.idx {
			c.downLocked(c.paths[f.aux], errors.New("the peer lost it"), false)
		}
	case tClose:
		c.peerClosed = true
		c.failLocked(ErrClosed)
	case tError:
		c.failLocked(fmt.Errorf("intnw: the peer refused the multi-socket: %s", f.data))
	default:
		c.refuseLocked(p, protoErr("%s frame on an open path", f.typ))
	}
}

// sampler reads the paths' sockets for their estimates, and ends a
// multi-socket that has had no path for Options.Linger.
func (c *Conn) sampler() {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		c.mu.Lock()
		var conns []*net.TCPConn
		var ps []*pathState
		for _, p := range c.liveLocked() {
			conns, ps = append(conns, p.tc), append(ps, p)
		}
		c.mu.Unlock()
		stats := make([]sockStats, len(conns))
		for i, tc := range conns {
			stats[i] = readSockStats(tc)
		}
		c.mu.Lock()
		for i, p := range ps {
			st := stats[i]
			if !p.up || p.tc != conns[i] || !st.ok {
				continue
			}
			if st.rtt > 0 {
				p.lat.add(st.rtt.Seconds())
			}
			p.minRTT = st.minRTT
			// A rate limited by what we had to send is a floor, not the
			// path's bandwidth. The kernel reports its last sample until
			// another is kept: each counts once, not once a read (a high
			// one read again and again would become the estimate).
			fresh := st.deliveryRate != p.rate
			if p.statsRead {
				p.fill.add(st.bytesAcked-p.bytesAcked, st.delivered-p.delivered, st.mss)
			}
			p.statsRead = true
			rate := st.deliveryRate * p.fill.ratio()
			if fresh && rate > 0 && (!st.appLimited || rate > p.bw.value()) {
				p.bw.add(rate)
				// The kernel keeps its last sample the sender did not
				// limit until a higher or another such one comes: a
				// measurement is a new rate, not only more deliveries
				// (the pings').
				if !st.appLimited && st.delivered != p.delivered && st.deliveryRate != p.rate {
					p.measuredAt = time.Now()
					notePeak(p, rate, p.measuredAt)
				}
			}
			c.busySampleLocked(p, st, time.Now())
			c.bwProbeLocked(p, st, time.Now())
			p.outq, p.retrans = st.outq, st.retrans
			p.delivered, p.rate, p.bytesAcked = st.delivered, st.deliveryRate, st.bytesAcked
		}
		now := time.Now()
		for _, p := range c.liveLocked() {
			if !p.stalled && !p.pingSent.IsZero() && now.Sub(p.pingSent) > c.stallAfterLocked(p) {
				p.stalled = true
				n := c.snd.requeue(p.idx)
				p.fgOut = 0
				c.opts.Logf("path %s stalled (no pong in %v): %d chunks to send again on other paths",
					c.statusLocked(p).Name, now.Sub(p.pingSent).Round(time.Millisecond), n)
			}
		}
		c.fireThunksLocked()
		if !c.noPathSince.IsZero() && time.Since(c.noPathSince) > c.opts.Linger && c.err == nil {
			c.failLocked(ErrNoPath)
		}
		c.kickLocked()
		c.mu.Unlock()
	}
}

// notePeak keeps path p's highest measured estimate of the last
// peakHold (a new one where the last is older), from a measurement of
// rate sample: the estimate where the sample reached it, else the sample
// (an estimate still at its hint or the default is not measured): a
// probe of a path whose estimate has fallen far below it recovers faster
// (upGainRecover).
func notePeak(p *pathState, sample float64, now time.Time) {
	if v := min(sample, bandwidth(p)); v >= p.peakBW || now.Sub(p.peakAt) > peakHold {
		p.peakBW, p.peakAt = v, now
	}
}

// busySample is the least span over which a path's standing queue is
// measured (at least a round trip).
const busySample = 250 * time.Millisecond

// busySampleLocked brings down an estimate above path p's rate. The
// kernel keeps its last rate sample while the ones its sender limited are
// lower, and a sender whose anticipatory bound is below its congestion
// window is the limit in the kernel's eyes: an estimate above the path's
// rate (a hint, the default, or a network that slowed) would never come
// down, and the bound taken from it lets a queue build ahead of the next
// foreground message. Such a queue is the sign: while the socket's
// smoothed round trip is above its least by more than twice what the
// bound allows (its window, AnticipateMin or on the widest path the
// anticipatory one, and a full segment's serialization at the estimate),
// the network limits what is delivered, and the payload
// acknowledged over busySample is the path's rate; taken when it is below
// the estimate. (A smaller margin would read the delayed acknowledgement
// and a slow link's serialization of a full segment, which a least round
// trip taken from short segments leaves out, as a queue.) Acknowledgements
// come in bursts, so a span can read low: the estimate this leaves on a
// loaded 0.3 Mbit/s path is 0.16-0.27 Mbit/s of payload (about 0.29).
func (c *Conn) busySampleLocked(p *pathState, st sockStats, now time.Time) {
	bw := bandwidth(p)
	allowed := bgWindow(p, c.usablePathsLocked(), now) + time.Duration(float64(max(st.mss, 536))/bw*float64(time.Second))
	if st.minRTT <= 0 || st.rtt-st.minRTT <= 2*allowed || st.outq == 0 {
		p.busySince = time.Time{}
		return
	}
	if p.busySince.IsZero() {
		p.busySince, p.busyAcked = now, st.bytesAcked
		return
	}
	if d := now.Sub(p.busySince); d >= max(busySample, st.rtt) {
		// Taken only if the socket still holds a round trip's worth at
		// that rate: a socket that ran short (a path another network
		// has just relieved, its queue draining) limited the span.
		if r := float64(st.bytesAcked-p.busyAcked) / d.Seconds(); r > 0 && r < bw && float64(st.outq) >= r*st.minRTT.Seconds() {
			p.bw.add(r)
		}
		p.busySince, p.busyAcked = now, st.bytesAcked
	}
}

// bwProbeLocked starts, ends and measures path p's probes upward of its
// bandwidth estimate. The anticipatory bound holds a path's socket to the
// estimate's pipe, so a sender it holds back sends at the estimate (a
// little under: the least round trip it counts is the short segments',
// not a full one's), and nothing it sends shows the path to be faster.
// (The kernel's rate is no help: it keeps its last sample the sender did
// not limit while the ones it did are lower.) As BBR does, the pipe
// counts upGain times while the path probes (upGainGrowing after a probe
// that raised the estimate), and the payload acknowledged over the
// probe's spans (each at least upSpan and a round trip) raises the
// estimate when it is higher; the bound grows with it. A probe lasts
// upRounds round trips: under BBR the socket's own pacing follows what it
// has delivered and lets the bound's extra out only in its own probing
// phase, one round trip in eight. If the path is no faster, the probe
// queues a tenth of a pipe (a quarter after one that found more), which
// the bound drains after it (it counts what is in flight). A path probes
// only while its bound holds background back, with a round trip's worth
// waiting, and upQuiet after foreground on it (a probe ends when
// foreground comes); a probe that raised the estimate is followed by
// another at once, one that did not by a longer wait. An estimate fallen
// below recoverBelow of its peak (notePeak) is probed at upGainRecover,
// outside stalls (recoverRTT).
func (c *Conn) bwProbeLocked(p *pathState, st sockStats, now time.Time) {
	if n := len(c.usablePathsLocked()); n != p.upPaths {
		// Its share of the work changed (a network came or went): what
		// the last probes found no longer says what a probe would.
		p.upPaths, p.upFlat, p.nextUp, p.upChain = n, 0, now, false
	}
	quiet := p.fgOut == 0 && now.Sub(p.lastFG) >= upQuiet
	if p.upUntil.IsZero() {
		held := now.Sub(p.heldAt) <= 2*sampleEvery &&
			float64(c.snd.bytes[BGSmall]+c.snd.bytes[BGLarge]) >= upGain*bandwidth(p)*st.rtt.Seconds()
		if st.rtt <= 0 || now.Before(p.nextUp) || !quiet || !held {
			return
		}
		p.upUntil = now.Add(upRounds * st.rtt)
		p.upFrom, p.upGrew, p.upBase = time.Time{}, false, bandwidth(p)
		p.upGainNow, p.upRecover = upGain, false
		switch {
		case p.peakBW > 0 && p.upBase < recoverBelow*p.peakBW && now.Sub(p.peakAt) <= peakHold &&
			st.minRTT > 0 && st.rtt <= recoverRTT*st.minRTT:
			p.upGainNow, p.upRecover = min(upGainRecover, p.peakBW/p.upBase), true
		case p.upChain:
			p.upGainNow = upGainGrowing
		}
		p.ups++
		return
	}
	// Each measurement runs from an acknowledgement to one at least
	// upSpan and a round trip later: the path's acknowledgements come a
	// few segments at a time, and a span cut between them would count
	// one more or one fewer.
	acked := st.bytesAcked != p.bytesAcked
	switch d := now.Sub(p.upFrom); {
	case !acked:
	case p.upFrom.IsZero():
		p.upFrom, p.upAcked, p.upRTT = now, st.bytesAcked, max(st.rtt, upSpan)
	case d >= p.upRTT:
		r := float64(st.bytesAcked-p.upAcked) / d.Seconds()
		p.bw.raise(r)
		notePeak(p, r, now)
		if bandwidth(p) > upGrowth*p.upBase {
			p.upGrew = true
		}
		p.upFrom, p.upAcked, p.upRTT = now, st.bytesAcked, max(st.rtt, upSpan)
	}
	if now.Before(p.upUntil) && quiet {
		return
	}
	p.upUntil = time.Time{}
	p.upChain = p.upGrew
	if p.upGrew {
		p.nextUp, p.upFlat = now, 0 // it may be faster still
		return
	}
	// A path that did not grow is probed less often, up to 2^upBackoff
	// times the cycle: each probe queues ahead of the foreground message
	// that may come during it.
	p.nextUp = now.Add(max(upCycle*baseRTT(p), upCycleMin) << min(p.upFlat, upBackoff))
	p.upFlat++
}

// stallAfterLocked is how long p's ping may wait for its pong: three
// round trips, at least stallMin, and the time to drain what its socket
// holds ahead of the ping.
func (c *Conn) stallAfterLocked(p *pathState) time.Duration {
	d := max(stallMin, time.Duration(3*p.lat.value()*float64(time.Second)))
	if bw := p.bw.value(); bw > 0 {
		d += time.Duration(float64(p.outq) / bw * float64(time.Second))
	}
	return d
}

// appropriateLocked says whether label l has a path that suits it now
// and, for background, whether what waits of l would go within
// Options.BackgroundBacklog.
func (c *Conn) appropriateLocked(l Label) bool {
	w := c.widestLocked()
	if w == nil {
		return false
	}
	if l == BGLarge && c.opts.BackgroundLargeMin > 0 && w.bw.value()*8 < c.opts.BackgroundLargeMin {
		return false
	}
	if !l.Foreground() && c.opts.BackgroundBacklog > 0 && c.snd.bytes[l] > 0 {
		var bw float64
		for _, p := range c.usablePathsLocked() {
			bw += p.bw.value()
		}
		if float64(c.snd.bytes[l]) > bw*c.opts.BackgroundBacklog.Seconds() {
			return false
		}
	}
	return true
}

func (c *Conn) fireThunksLocked() {
	for l := range c.thunks {
		if len(c.thunks[l]) == 0 || !c.appropriateLocked(Label(l)) {
			continue
		}
		for _, t := range c.thunks[l] {
			if !t.done {
				t.done = true
				go t.fn()
			}
		}
		c.thunks[l] = nil
	}
}

// IROB is an IROB being sent: Write its bytes, then End it.
type IROB struct {
	c  *Conn
	ir *sirob
}

// ID is the IROB's id, which later IROBs may depend on.
func (i *IROB) ID() uint64 { return i.ir.id }

// Begin begins an IROB labelled l that the peer receives after every IROB
// in deps (ids of IROBs begun earlier on this multi-socket). When no path
// suits l (none is up; for bg-large, none has
// Options.BackgroundLargeMin; for background, the label's data already
// waiting would take longer than Options.BackgroundBacklog to send) and
// thunk is not nil, the IROB is not begun: Begin returns a
// *DeferredError and calls thunk (on its own goroutine) once a path
// suits l. Without a thunk the IROB is begun and waits for a path.
func (c *Conn) Begin(l Label, deps []uint64, thunk func()) (*IROB, error) {
	return c.begin(l, deps, false, thunk)
}

func (c *Conn) begin(l Label, deps []uint64, depAll bool, fn func()) (*IROB, error) {
	if !l.Valid() {
		return nil, fmt.Errorf("intnw: %v is not a label (want fg-small, fg-large, bg-small or bg-large)", l)
	}
	if len(deps) > MaxDeps {
		return nil, fmt.Errorf("intnw: %d dependencies, at most %d", len(deps), MaxDeps)
	}
	deps = slices.Clone(deps)
	slices.Sort(deps)
	deps = slices.Compact(deps)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return nil, err
	}
	for _, d := range deps {
		if d == 0 || d >= c.snd.nextID {
			return nil, fmt.Errorf("intnw: a dependency on IROB %d, which this multi-socket has not begun (its IROBs so far: 1..%d)", d, c.snd.nextID-1)
		}
	}
	if fn != nil && !c.appropriateLocked(l) {
		t := &thunk{fn: fn}
		c.thunks[l] = append(c.thunks[l], t)
		return nil, &DeferredError{Label: l, t: t, c: c}
	}
	ir := &sirob{id: c.snd.nextID, label: l, deps: deps, depAll: depAll, want: -1}
	c.snd.nextID++
	c.foregroundLocked(l, 0, time.Now())
	return &IROB{c: c, ir: ir}, nil
}

// foregroundLocked chooses the path for n bytes of foreground written
// with label l (the soonest to deliver them for small, the widest for
// large) and notes the foreground on it: that path's background is held
// to its anticipatory bound from now. It returns the path's index (-1:
// background, or no path).
func (c *Conn) foregroundLocked(l Label, n int, now time.Time) int {
	if !l.Foreground() {
		return -1
	}
	p := c.fgPathLocked(l, n)
	if p == nil {
		return -1
	}
	p.lastFG = now
	return p.idx
}

func (c *Conn) usableLocked() error {
	switch {
	case c.err != nil:
		return c.err
	case c.closing:
		return ErrClosed
	}
	return nil
}

// Write adds b to the IROB. It waits while the multi-socket holds
// Options.SendBuffer bytes the peer has not acknowledged.
func (i *IROB) Write(b []byte) (int, error) {
	c := i.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if i.ir.ended {
		return 0, fmt.Errorf("intnw: IROB %d: write after End", i.ir.id)
	}
	written := 0
	for len(b) > 0 {
		for c.snd.unacked >= c.opts.SendBuffer && c.usableLocked() == nil {
			c.sendCond.Wait()
		}
		if err := c.usableLocked(); err != nil {
			return written, err
		}
		n := min(len(b), c.opts.SendBuffer-c.snd.unacked)
		c.snd.write(i.ir, b[:n], c.foregroundLocked(i.ir.label, n, time.Now()))
		b, written = b[n:], written+n
		c.kickLocked()
	}
	return written, nil
}

// End ends the IROB: the peer may deliver it once all its bytes arrived.
func (i *IROB) End() error {
	c := i.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if i.ir.ended {
		return fmt.Errorf("intnw: IROB %d ended twice", i.ir.id)
	}
	if err := c.usableLocked(); err != nil {
		return err
	}
	c.snd.end(i.ir)
	c.kickLocked()
	return nil
}

// Send sends b as one IROB labelled l that depends on every IROB begun
// before it (a TCP-like stream, with labels). It returns the IROB's id;
// thunk is as for Begin.
func (c *Conn) Send(l Label, b []byte, thunk func()) (uint64, error) {
	ir, err := c.begin(l, nil, true, thunk)
	if err != nil {
		return 0, err
	}
	return ir.ID(), ir.send(b)
}

// SendAfter sends b as one IROB labelled l that depends on deps only.
func (c *Conn) SendAfter(l Label, deps []uint64, b []byte, thunk func()) (uint64, error) {
	ir, err := c.Begin(l, deps, thunk)
	if err != nil {
		return 0, err
	}
	return ir.ID(), ir.send(b)
}

func (i *IROB) send(b []byte) error {
	if _, err := i.Write(b); err != nil {
		return err
	}
	return i.End()
}

// wakeOnDone wakes cond's waiters when ctx ends, so that they see it; the
// function it returns stops that.
func (c *Conn) wakeOnDone(ctx context.Context, cond *sync.Cond) func() bool {
	return context.AfterFunc(ctx, func() {
		c.mu.Lock()
		cond.Broadcast()
		c.mu.Unlock()
	})
}

// Recv returns the next IROB the peer sent, whole: foreground before
// background, then in order of id, each after the IROBs it depends on.
// After the peer closed it returns what came before and then io.EOF.
func (c *Conn) Recv(ctx context.Context) (Message, error) {
	defer c.wakeOnDone(ctx, c.recvCond)()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if m, ok := c.rcv.next(); ok {
			c.recvCond.Broadcast()
			return m, nil
		}
		switch {
		case c.peerClosed:
			return Message{}, io.EOF
		case c.err != nil:
			return Message{}, c.err
		case ctx.Err() != nil:
			return Message{}, ctx.Err()
		}
		c.recvCond.Wait()
	}
}

// Flush waits until the peer has acknowledged everything sent, or ctx
// ends.
func (c *Conn) Flush(ctx context.Context) error {
	defer c.wakeOnDone(ctx, c.sendCond)()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.snd.idle() {
		if c.err != nil {
			return c.err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("intnw: %d bytes not acknowledged: %w", c.snd.unacked, err)
		}
		c.sendCond.Wait()
	}
	return nil
}

// Close flushes what was sent (for at most timeout), tells the peer and
// ends the multi-socket. It returns an error if something sent was not
// acknowledged.
func (c *Conn) Close(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ferr := c.Flush(ctx)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		if errors.Is(err, ErrClosed) {
			return ferr
		}
		return err
	}
	c.closing = true
	var wrote []chan struct{}
	for _, p := range c.liveLocked() {
		p.ctrl = append(p.ctrl, &frame{typ: tClose})
		wrote = append(wrote, p.wrote)
	}
	c.kickLocked()
	c.mu.Unlock()
	for _, w := range wrote {
		select {
		case <-w:
		case <-time.After(time.Second):
		}
	}
	// The close frames are out: end each path's sending half and let the
	// readers take what the peer still sends (a probe, data in flight)
	// until it closes its end on the close frame, for up to a second.
	// Closing a socket with unread data would send a reset, which can
	// overtake the close frame and leave the peer redialling instead.
	c.mu.Lock()
	for _, p := range c.liveLocked() {
		_ = p.tc.CloseWrite()
	}
	c.mu.Unlock()
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		n := len(c.liveLocked())
		c.mu.Unlock()
		if n == 0 {
			break
		}
	}
	c.mu.Lock()
	c.failLocked(ErrClosed)
	c.mu.Unlock()
	return ferr
}

// Paths is the state of each path.
func (c *Conn) Paths() []PathStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []PathStatus
	for _, p := range c.paths {
		out = append(out, c.statusLocked(p))
	}
	return out
}

func (c *Conn) statusLocked(p *pathState) PathStatus {
	st := PathStatus{Index: p.idx, Name: p.cfg.Name, Up: p.up, Stalled: p.up && p.stalled, RTT: time.Duration(p.lat.value() * float64(time.Second)),
		Bandwidth: p.bw.value() * 8, Queued: p.outq, Sent: p.sent, Received: p.received, Retransmits: p.retrans,
		Measured: !p.measuredAt.IsZero(), Probes: p.probes, UpProbes: p.ups}
	if st.Name == "" {
		st.Name = fmt.Sprintf("path%d", p.idx)
	}
	if p.tc != nil {
		st.Local, st.Remote = p.tc.LocalAddr().String(), p.tc.RemoteAddr().String()
	}
	if p.lastErr != nil {
		st.Err = p.lastErr.Error()
	}
	st.DialErr = p.dialErr
	return st
}

// Done is closed when the multi-socket has ended; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the multi-socket ended (nil while it lives).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

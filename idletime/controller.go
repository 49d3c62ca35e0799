package idletime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// sampleInterval is how often the controller reads LastBackground of a
	// released gate, to split released time into B and I.
	sampleInterval = 25 * time.Millisecond
	// bgQuiet is how long after its last stamp background counts as still
	// in service: longer than a disk's random-I/O service time (about
	// 20 ms, the paper's Section 2) and than the gaps of a background flow.
	// Foreground arriving within bgQuiet of background activity since the
	// gate was released is a preemption (B[f]), later an idle arrival
	// (I[f]).
	bgQuiet = 2 * sampleInterval
	// retryDelay is how long a gate whose Hold or Release failed waits
	// before the controller tries again, so a failing gate cannot spin the
	// loop.
	retryDelay = sampleInterval
	// logEvery limits error messages to one per gate and second; the
	// others are counted and summarized in the next message.
	logEvery = time.Second
	// reactionWindow is how many of the latest holds the reaction
	// percentiles cover.
	reactionWindow = 4096
)

// Controller drives resources' Gates from the kernel's foreground Events,
// implementing a preemption interval per gate:
//
//   - An Event for a released gate holds it (Gate.Hold), so background
//     stops starting, and arms a check at max(Event.At, LastForeground)+PI.
//   - At the check, if foreground continued (LastForeground advanced), the
//     check moves to LastForeground+PI; otherwise the PI expired and the
//     gate is released (Gate.Release), which also re-arms the kernel's
//     foreground detector.
//   - PI 0 never holds: each Event is counted and the gate released again
//     to re-arm the detector. An Infinite PI holds at the first Event and
//     never releases until Run ends.
//
// Each gate has a Machine, which keeps the paper's counters and the time
// per state. The controller sees foreground only as Events and
// LastForeground stamps, not each request's start and end, so each
// observation is stepped as f followed at once by i: held time shows as P
// (F has no time), and P[f] counts checks at which foreground had
// advanced, not foreground requests.
// Released time is split into B and I by reading LastBackground every
// 25 ms: background counts as running from the sample before its first new
// stamp until its last stamp, once no stamp came for 50 ms.
//
// An Event is a preemption (B[f]) when background was stamped after the
// gate's last release and within those 50 ms before the Event, and
// foreground at an idle resource (I[f]) otherwise: background that ran
// after the release but had long finished did not delay the foreground.
//
// In mode Adaptive each gate's PI adapts to its own counters and to the
// gap before each preemption (Policy.Adapt); in modes
// Fixed and Auto all gates share one PI. A failing Gate call is counted in
// GateStats.Errors and logged (at most once a second per gate); a gate
// whose Hold fails stays released and is re-armed 25 ms later, one whose
// Release fails stays held and is released again 25 ms later.
//
// Run holds the loop; Stats and SetRTT may be called from any goroutine.
type Controller struct {
	policy Policy
	logf   func(string, ...any)
	now    func() Mono
	gates  []*gateCtl
	wake   chan struct{}
	active atomic.Bool
	// observe, when set, is told of every hold and release (OnTransition).
	observe func(Transition)

	mu      sync.Mutex // guards the fields below and those of gateCtl that Stats reads
	rtt     time.Duration
	ignored uint64
	running bool
	stopped Mono // when Run last ended
}

// gateCtl is the controller's state for one gate. Only Run's goroutine
// changes it; fields Stats reads change under Controller.mu.
type gateCtl struct {
	g    Gate
	name string
	idx  int

	// Read by Stats.
	m         *Machine
	pi        time.Duration
	steady    bool // Adaptive: Window.Steady
	held      bool
	holds     uint64
	releases  uint64
	errors    uint64
	reactions [reactionWindow]time.Duration
	nReact    uint64
	reactHist Histogram

	// Loop-only.
	releasedAt Mono // when the gate was last released
	lastLF     Mono // the latest foreground stamp stepped into the machine
	lastLB     Mono // the latest background stamp seen
	lastSample Mono // when LastBackground was last read
	check      Mono // while held: when to check the PI next; 0 never
	retry      Mono // while released: when to re-arm after a failure; 0 never
	lastLog    Mono
	unlogged   int
}

// NewController returns a controller for gates under policy p. now reads
// the clock of the gates' time stamps, CLOCK_MONOTONIC (the daemon passes
// monoclock's). logf receives error messages (nil discards them).
func NewController(p Policy, gates []Gate, now func() Mono, logf func(string, ...any)) (*Controller, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		return nil, fmt.Errorf("idletime: no clock")
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	c := &Controller{policy: p, logf: logf, now: now, wake: make(chan struct{}, 1)}
	for i, g := range gates {
		if g == nil {
			return nil, fmt.Errorf("idletime: gate %d is nil", i)
		}
		pi := p.Initial()
		c.gates = append(c.gates, &gateCtl{g: g, name: g.Name(), idx: i, m: NewMachine(pi), pi: pi})
	}
	return c, nil
}

// Transition is a gate being held or released by the controller.
type Transition struct {
	// Gate is the gate's index in the gates given to NewController, Name
	// its name.
	Gate int
	Name string
	// Held: the gate was held (its background stopped); else released.
	Held bool
	// PI is the gate's preemption interval at the transition.
	PI time.Duration
	// Reason says why: "foreground" (a hold: foreground arrived at the
	// released gate), "pi-expired" (no foreground for a PI), "stopped"
	// (Run ended and released every gate).
	Reason string
	// At is when it happened (the controller's clock).
	At Mono
}

// Reasons of Transitions.
const (
	ReasonForeground = "foreground"
	ReasonPIExpired  = "pi-expired"
	ReasonStopped    = "stopped"
)

// OnTransition makes the controller call f after each successful hold of
// a gate and each release of a held one, from Run's goroutine, outside
// the controller's lock (f may call Stats). It must be called before Run;
// f should return quickly (the controller waits for it). A PI of 0 holds
// nothing, so it reports nothing.
func (c *Controller) OnTransition(f func(Transition)) {
	if c.active.Load() {
		panic("idletime: OnTransition called while Run is active")
	}
	c.observe = f
}

func (c *Controller) notify(gc *gateCtl, held bool, pi time.Duration, reason string, at Mono) {
	if c.observe != nil {
		c.observe(Transition{Gate: gc.idx, Name: gc.name, Held: held, PI: pi, Reason: reason, At: at})
	}
}

// SetRTT gives the RTT of the foreground flows (the caller chooses:
// minimum or smoothed), the input of mode Auto (other modes ignore it).
// It may be called from any goroutine; a running PI moves to its new
// deadline at once.
func (c *Controller) SetRTT(d time.Duration) {
	c.mu.Lock()
	c.rtt = d
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Ignored returns how many events named no gate (index out of range).
func (c *Controller) Ignored() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ignored
}

// Run drives the gates from events until ctx ends, then releases every
// gate and returns nil, or the release errors. It first releases every
// gate, so that each starts released with its foreground detector armed.
// If events is closed, Run releases every gate and returns an error. Only
// one Run may be active at a time.
func (c *Controller) Run(ctx context.Context, events <-chan Event) error {
	if !c.active.CompareAndSwap(false, true) {
		return errors.New("idletime: controller already running")
	}
	defer c.active.Store(false)
	c.mu.Lock()
	c.running = true
	c.mu.Unlock()
	for _, gc := range c.gates {
		c.start(gc)
	}
	c.applyRTT()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := c.now()
		c.due(now)
		if wait := time.Duration(c.next(now) - c.now()); wait > 0 {
			timer.Reset(wait)
		} else {
			timer.Reset(0)
		}
		select {
		case <-ctx.Done():
			return c.stop()
		case e, ok := <-events:
			if !ok {
				return errors.Join(errors.New("idletime: event channel closed"), c.stop())
			}
			c.event(e)
		case <-c.wake:
			c.applyRTT()
		case <-timer.C:
		}
	}
}

// start releases a gate as Run begins.
func (c *Controller) start(gc *gateCtl) {
	lb, lbErr := gc.g.LastBackground()
	err := gc.g.Release()
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	gc.m.Advance(time.Duration(now))
	gc.held, gc.check, gc.retry = false, 0, 0
	gc.releasedAt, gc.lastSample = now, now
	if lbErr != nil {
		c.failLocked(gc, now, "last background", lbErr)
	} else {
		gc.lastLB = max(gc.lastLB, lb)
	}
	if err != nil {
		c.failLocked(gc, now, "release", err)
		gc.retry = now + Mono(retryDelay)
		return
	}
	gc.releases++
}

// stop releases every gate as Run ends.
func (c *Controller) stop() error {
	var errs []error
	for _, gc := range c.gates {
		err := gc.g.Release()
		now := c.now()
		c.mu.Lock()
		gc.m.Advance(time.Duration(now))
		wasHeld, pi := gc.held, gc.pi
		gc.held, gc.check, gc.retry = false, 0, 0
		if err != nil {
			c.failLocked(gc, now, "release", err)
			errs = append(errs, fmt.Errorf("idletime: release %s: %w", gc.name, err))
		} else {
			gc.releases++
		}
		c.mu.Unlock()
		if err == nil && wasHeld {
			c.notify(gc, false, pi, ReasonStopped, now)
		}
	}
	c.mu.Lock()
	c.running, c.stopped = false, c.now()
	c.mu.Unlock()
	return errors.Join(errs...)
}

// next is when the loop must wake next.
func (c *Controller) next(now Mono) Mono {
	next := now + Mono(time.Hour)
	for _, gc := range c.gates {
		if gc.held {
			if gc.check != 0 {
				next = min(next, gc.check)
			}
			continue
		}
		if gc.retry != 0 {
			next = min(next, gc.retry)
		}
		next = min(next, gc.lastSample+Mono(sampleInterval))
	}
	return next
}

// due does the checks, retries and samples whose time has come.
func (c *Controller) due(now Mono) {
	for _, gc := range c.gates {
		switch {
		case gc.held:
			if gc.check != 0 && now >= gc.check {
				c.checkPI(gc, now)
			}
		default:
			if gc.retry != 0 && now >= gc.retry {
				c.rearm(gc)
			}
			if now >= gc.lastSample+Mono(sampleInterval) {
				c.sample(gc, now)
			}
		}
	}
}

// applyRTT sets every gate's PI from the RTT (mode Auto).
func (c *Controller) applyRTT() {
	if c.policy.Mode != Auto {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pi := c.policy.FromRTT(c.rtt)
	for _, gc := range c.gates {
		gc.pi = pi
		gc.m.SetPI(gc.machinePI())
		if gc.held {
			gc.check = deadlineOf(gc.m)
		}
	}
}

// machinePI is the PI the gate's machine runs: the policy's (gc.pi), or
// the gate's spacing where that is longer (Spacer). The policy's own
// state (Adaptive's window, Auto's RTT multiple) keeps gc.pi. Callers
// hold c.mu.
func (gc *gateCtl) machinePI() time.Duration {
	pi := gc.pi
	if pi == 0 || pi == Infinite {
		return pi
	}
	if s, ok := gc.g.(Spacer); ok {
		pi = max(pi, s.Spacing())
	}
	return pi
}

// deadlineOf is when a held gate's PI must be checked; 0 for never.
func deadlineOf(m *Machine) Mono {
	d, ok := m.Deadline()
	if !ok {
		return 0
	}
	return max(Mono(d), 1)
}

// sample reads LastBackground of a released gate.
func (c *Controller) sample(gc *gateCtl, now Mono) {
	lb, err := gc.g.LastBackground()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failLocked(gc, now, "last background", err)
		gc.lastSample = now
		return
	}
	c.observeLocked(gc, lb, now)
}

// observeLocked steps a released gate's machine between I and B from
// background stamp lb read at time now.
func (c *Controller) observeLocked(gc *gateCtl, lb, now Mono) {
	m := gc.m
	if lb > gc.lastLB && lb > gc.releasedAt && m.State() == Idle {
		// Background started after the previous sample saw none.
		m.Step(time.Duration(min(max(gc.lastSample, gc.releasedAt), lb)), EvB)
	}
	gc.lastLB = max(gc.lastLB, lb)
	if m.State() == Background && now-gc.lastLB >= Mono(bgQuiet) {
		m.Step(time.Duration(gc.lastLB), EvI)
	}
	gc.lastSample = max(gc.lastSample, now)
}

// event handles the kernel's report of foreground on a gate.
func (c *Controller) event(e Event) {
	if e.Gate < 0 || e.Gate >= len(c.gates) {
		c.mu.Lock()
		c.ignored++
		c.mu.Unlock()
		return
	}
	gc := c.gates[e.Gate]
	if gc.held {
		return // foreground while held shows in LastForeground
	}
	now := c.now()
	at := e.At
	if at <= 0 || at > now {
		at = now
	}
	lb, lbErr := gc.g.LastBackground()
	if lbErr != nil {
		lb = 0
	}

	// Bring the machine to B or I as of the event, then step f: B[f] is a
	// preemption, I[f] foreground at an idle resource.
	c.mu.Lock()
	if lbErr != nil {
		c.failLocked(gc, now, "last background", lbErr)
	}
	c.observeLocked(gc, lb, at)
	pi := gc.pi // Adaptive and Auto PIs are never 0
	c.mu.Unlock()

	if pi == 0 {
		// A priority queue: no hold, F→P→I at once; re-arm the detector.
		c.mu.Lock()
		gc.m.Step(time.Duration(at), EvF)
		gc.m.Step(time.Duration(at), EvI)
		c.mu.Unlock()
		c.release(gc)
		return
	}

	err := gc.g.Hold()
	held := c.now()
	if err != nil {
		c.mu.Lock()
		c.failLocked(gc, held, "hold", err)
		gc.retry = held + Mono(retryDelay)
		c.mu.Unlock()
		return
	}
	lf, lfErr := gc.g.LastForeground()
	c.mu.Lock()
	if lfErr != nil {
		c.failLocked(gc, held, "last foreground", lfErr)
		lf = 0
	}
	// The PI runs from the latest foreground stamp: the f is stepped at
	// max(At, LastForeground), so the stamps between the Event and the
	// Hold count to the state before.
	base := max(at, lf)
	prior := gc.m.State()
	var gap time.Duration // since the foreground before; 0: none yet
	if gc.lastLF > 0 && at > gc.lastLF {
		gap = time.Duration(at - gc.lastLF)
	}
	gc.m.Step(time.Duration(base), EvF)
	w := c.policy.Adapt(Window{gc.pi, gc.steady}, prior, gap)
	gc.pi, gc.steady = w.PI, w.Steady
	gc.m.SetPI(gc.machinePI())
	gc.m.Step(time.Duration(base), EvI)
	gc.lastLF = base
	gc.held, gc.retry = true, 0
	gc.holds++
	if e.Held != 0 {
		held = e.Held
	}
	gc.reactions[gc.nReact%reactionWindow] = time.Duration(max(held-at, 0))
	gc.nReact++
	gc.reactHist.observe(time.Duration(max(held-at, 0)))
	gc.check = deadlineOf(gc.m)
	pi = gc.m.PI()
	c.mu.Unlock()
	c.notify(gc, true, pi, ReasonForeground, held)
}

// checkPI decides, at a held gate's check time, whether its PI expired.
func (c *Controller) checkPI(gc *gateCtl, now Mono) {
	lf, err := gc.g.LastForeground()
	c.mu.Lock()
	if err != nil {
		c.failLocked(gc, now, "last foreground", err)
		lf = gc.lastLF
	}
	if lf > gc.lastLF {
		// Foreground arrived during the PI: P[f], and the PI restarts. A
		// stamp after the deadline, seen by a late check, still came
		// while the gate was held: for the kernel the PI had not expired,
		// so the running PI is stretched to cover it.
		at, prior := time.Duration(lf), gc.m.State()
		if d, ok := gc.m.Deadline(); ok && at >= d {
			gc.m.SetPI(gc.m.PI() + (at - d) + 1)
		}
		gc.m.Step(at, EvF)
		w := c.policy.Adapt(Window{gc.pi, gc.steady}, prior, time.Duration(lf-gc.lastLF))
		gc.pi, gc.steady = w.PI, w.Steady
		gc.m.SetPI(gc.machinePI())
		gc.m.Step(at, EvI)
		gc.lastLF = lf
	}
	d, ok := gc.m.Deadline()
	if !ok || now < Mono(d) {
		gc.check = deadlineOf(gc.m)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.release(gc)
}

// release releases a gate whose PI expired (or that is never held, PI 0).
// If Release fails the gate stays as it was and is retried later.
func (c *Controller) release(gc *gateCtl) {
	err := gc.g.Release()
	now := c.now()
	c.mu.Lock()
	wasHeld, pi := gc.held, gc.machinePI()
	defer func() {
		c.mu.Unlock()
		if err == nil && wasHeld {
			c.notify(gc, false, pi, ReasonPIExpired, now)
		}
	}()
	if err != nil {
		c.failLocked(gc, now, "release", err)
		if gc.held {
			gc.check = now + Mono(retryDelay)
		} else {
			gc.retry = now + Mono(retryDelay)
		}
		return
	}
	gc.releases++
	gc.m.Advance(time.Duration(now)) // t: P→I
	gc.held, gc.check, gc.retry = false, 0, 0
	gc.releasedAt, gc.lastSample = now, now
}

// rearm releases a released gate again after a failed Hold or Release, so
// its foreground detector is armed.
func (c *Controller) rearm(gc *gateCtl) {
	err := gc.g.Release()
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failLocked(gc, now, "release", err)
		gc.retry = now + Mono(retryDelay)
		return
	}
	gc.releases++
	gc.retry = 0
}

// failLocked counts an error of a gate operation and logs it, at most
// once per logEvery per gate.
func (c *Controller) failLocked(gc *gateCtl, now Mono, op string, err error) {
	gc.errors++
	if gc.lastLog != 0 && now-gc.lastLog < Mono(logEvery) {
		gc.unlogged++
		return
	}
	if gc.unlogged > 0 {
		c.logf("idletime: %s: %s: %v (and %d more errors in the last %v)", gc.name, op, err, gc.unlogged, logEvery)
	} else {
		c.logf("idletime: %s: %s: %v", gc.name, op, err)
	}
	gc.lastLog, gc.unlogged = now, 0
}

// GateStats is the state and counters of one gate.
type GateStats struct {
	Name string `json:"name"`
	// State is the machine's state: "idle", "foreground", "background"
	// or "in_pi" (a held gate is in_pi).
	State string `json:"state"`
	// Held tells whether the gate holds its background now.
	Held bool `json:"held"`
	// PI is the current PI length (Infinite is 1<<63-1): the policy's,
	// or the gate's spacing where that is longer (Spacer).
	PI time.Duration `json:"pi_ns"`
	// Time is the time spent in each state since Run started (until it
	// ended). Held time counts as in_pi.
	Time StateTimes `json:"time"`
	// Preemptions counts foreground arriving while background was
	// served, B[f].
	Preemptions uint64 `json:"preemptions"`
	// ForegroundIdle counts foreground arriving at an idle resource, I[f].
	ForegroundIdle uint64 `json:"foreground_idle"`
	// ForegroundInPI counts PI checks that found foreground continuing,
	// P[f].
	ForegroundInPI uint64 `json:"foreground_in_pi"`
	// Expiries counts PIs that expired, P[t].
	Expiries uint64 `json:"expiries"`
	// Holds and Releases count successful Gate calls; Errors counts
	// failed Gate calls of any kind.
	Holds    uint64 `json:"holds"`
	Releases uint64 `json:"releases"`
	Errors   uint64 `json:"errors"`
	// Reaction is the time from the kernel's Event to the background
	// being held (Event.Held, else the return of Hold), over the latest
	// 4096 holds.
	Reaction Percentiles `json:"reaction"`
	// ReactionHist is every hold's reaction since the controller started,
	// in ReactionBounds' buckets (the metrics' histogram).
	ReactionHist Histogram `json:"-"`
	// Counters is the paper's X[state][event], keyed like "B[f]".
	Counters map[string]uint64 `json:"counters"`
}

// StateTimes is time per state.
type StateTimes struct {
	Idle       time.Duration `json:"idle_ns"`
	Foreground time.Duration `json:"foreground_ns"`
	Background time.Duration `json:"background_ns"`
	InPI       time.Duration `json:"in_pi_ns"`
}

// ReactionBounds are the upper bounds of a Histogram's buckets: from the
// tens of microseconds a BPF-signalled hold takes to the tens of
// milliseconds of a polled one.
var ReactionBounds = [...]time.Duration{
	25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond,
	500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
}

// Histogram counts durations in ReactionBounds' buckets since a gate's
// controller started: Counts[i] holds those at most ReactionBounds[i]
// and above the bound before it (not cumulative); longer ones are only
// in Count and Sum.
type Histogram struct {
	Counts [len(ReactionBounds)]uint64
	Count  uint64
	Sum    time.Duration
}

func (h *Histogram) observe(d time.Duration) {
	h.Count++
	h.Sum += d
	for i, b := range ReactionBounds {
		if d <= b {
			h.Counts[i]++
			return
		}
	}
}

// Percentiles summarizes durations.
type Percentiles struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// Stats returns every gate's state and counters, in the order of the
// gates given to NewController. It may be called from any goroutine.
func (c *Controller) Stats() []GateStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.now()
	if !c.running && c.stopped != 0 {
		end = c.stopped
	}
	out := make([]GateStats, 0, len(c.gates))
	for _, gc := range c.gates {
		m := gc.m
		t := m.TimesAt(time.Duration(end))
		s := GateStats{
			Name:           gc.name,
			State:          m.State().String(),
			Held:           gc.held,
			PI:             gc.machinePI(),
			Time:           StateTimes{Idle: t[Idle], Foreground: t[Foreground], Background: t[Background], InPI: t[InPI]},
			Preemptions:    m.Count(Background, EvF),
			ForegroundIdle: m.Count(Idle, EvF),
			ForegroundInPI: m.Count(InPI, EvF),
			Expiries:       m.Count(InPI, EvT),
			Holds:          gc.holds,
			Releases:       gc.releases,
			Errors:         gc.errors,
			Reaction:       percentiles(gc.reactions[:min(gc.nReact, reactionWindow)]),
			ReactionHist:   gc.reactHist,
			Counters:       map[string]uint64{},
		}
		for st := range numStates {
			for e := range numEvs {
				if n := m.Count(st, e); n > 0 {
					s.Counters[st.letter()+"["+e.String()+"]"] = n
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// percentiles summarizes d (nearest rank).
func percentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := func(p int) time.Duration { return s[(len(s)*p+99)/100-1] }
	return Percentiles{N: len(s), P50: rank(50), P99: rank(99), Max: s[len(s)-1]}
}

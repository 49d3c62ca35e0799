package boost

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Kind is how the boost moves during a contact.
type Kind string

const (
	// Static holds Initial for the whole contact.
	Static Kind = "static"
	// Incr starts at Initial and raises the priority one nice level a
	// step until Final (the seed's priority incrementing).
	Incr Kind = "incr"
	// Decr starts at Initial and lowers the priority one level a step
	// until Final (priority decrementing: no boost left in a long stay).
	Decr Kind = "decr"
)

// Unit is what a dynamic policy's steps count.
type Unit string

const (
	// Events: socket segments sent or received (or, for sockets without
	// segment counters, read and write calls).
	Events Unit = "events"
	// Time: time since the process began communicating in the contact.
	Time Unit = "time"
	// Bytes: bytes the process's sockets sent or received.
	Bytes Unit = "bytes"
)

// Ending is what happens to boosts when the contact ends.
type Ending string

const (
	// Reset gives every boosted process its own priority back.
	Reset Ending = "reset"
	// Retain leaves the boosts in place and continues from them at the
	// next contact (the seed: a disconnected communicating process
	// blocks anyway, so its priority does no harm).
	Retain Ending = "retain"
)

// Source is who counts as communicating in a contact.
type Source string

const (
	// Traffic: the processes whose sockets carry traffic in the contact
	// (the seed's boosted set), each from its first event in it.
	Traffic Source = "traffic"
	// Start: those, and a process that starts in the lane during the
	// contact or while the link was down before it, from its start (or
	// the contact's, if later): the part of its life before its first
	// packet (loading, a TLS library's set-up, connecting, waiting for
	// the network) is run ahead of the lane's CPU hogs too. Beyond the
	// seed, whose processes have their sockets before the contact
	// begins.
	Start Source = "start"
)

// Nice values: the most and least boosted.
const (
	NiceMin = -20
	NiceMax = 19
)

// Policy is one of the seed's linear boosting policies.
type Policy struct {
	Kind Kind
	// Initial is the nice value a communicating process gets when the
	// contact begins (or when it first communicates in it); Final is
	// where a dynamic policy's steps end. Static uses Initial only.
	Initial, Final int
	// Step is what a dynamic policy counts; Every how many of it make
	// one step: events, nanoseconds (a time.Duration) or bytes.
	Step  Unit
	Every float64
	// Clamp is the most boosted nice value a policy may set (the seed:
	// −20, "low enough that user-level processes do not interfere with
	// essential system operations").
	Clamp int
	// OnLeave is what the end of a contact does.
	OnLeave Ending
	// Slice, when not zero, is the EEVDF slice a boosted thread gets
	// beside its nice (Linux 6.12's custom slices, SliceMin..SliceMax).
	// Nice gives a sender a larger share of the CPU, but when it wakes
	// it may still wait out the running hog's slice; a short slice has
	// it picked at once, and run in short turns. Zero keeps the
	// thread's slice.
	Slice time.Duration
	// From is who counts as communicating; "" is Traffic.
	From Source
}

// SliceMin and SliceMax bound Policy.Slice: the kernel's clamp of a fair
// thread's sched_runtime.
const (
	SliceMin = 100 * time.Microsecond
	SliceMax = 100 * time.Millisecond
)

// Check says what is wrong with a policy, naming the key (as the config
// spells it: policy, initial, final, step, every, clamp, on_leave, slice).
func (p Policy) Check() error {
	nice := func(key string, v int) error {
		if v < NiceMin || v > NiceMax {
			return fmt.Errorf("%s: nice %d outside %d..%d", key, v, NiceMin, NiceMax)
		}
		return nil
	}
	switch p.Kind {
	case Static, Incr, Decr:
	default:
		return fmt.Errorf("policy: unknown policy %q (want static, incr or decr)", p.Kind)
	}
	for _, e := range []error{nice("initial", p.Initial), nice("clamp", p.Clamp)} {
		if e != nil {
			return e
		}
	}
	switch p.OnLeave {
	case Reset, Retain:
	default:
		return fmt.Errorf("on_leave: unknown ending %q (want reset or retain)", p.OnLeave)
	}
	if p.Initial < p.Clamp {
		return fmt.Errorf("initial: nice %d is beyond the clamp %d", p.Initial, p.Clamp)
	}
	switch p.From {
	case "", Traffic, Start:
	default:
		return fmt.Errorf("from: unknown source %q (want traffic: processes whose sockets carry traffic in the contact, or start: those and processes that start in the lane during it or while the link is down before it)", p.From)
	}
	if p.Slice != 0 && (p.Slice < SliceMin || p.Slice > SliceMax) {
		return fmt.Errorf("slice: %v outside %v..%v (the kernel's bounds)", p.Slice, SliceMin, SliceMax)
	}
	if p.Kind == Static {
		return nil
	}
	if err := nice("final", p.Final); err != nil {
		return err
	}
	if p.Final < p.Clamp {
		return fmt.Errorf("final: nice %d is beyond the clamp %d", p.Final, p.Clamp)
	}
	switch {
	case p.Kind == Incr && p.Final >= p.Initial:
		return fmt.Errorf("final: incr raises the priority from initial %d, so final must be a lower nice value (got %d)", p.Initial, p.Final)
	case p.Kind == Decr && p.Final <= p.Initial:
		return fmt.Errorf("final: decr lowers the priority from initial %d, so final must be a higher nice value (got %d)", p.Initial, p.Final)
	}
	switch p.Step {
	case Events, Time, Bytes:
	default:
		return fmt.Errorf("step: unknown step %q (want events, time or bytes)", p.Step)
	}
	if !(p.Every > 0) || math.IsInf(p.Every, 0) {
		return fmt.Errorf("every: %v must be positive", p.Every)
	}
	return nil
}

// Level is the nice value after progress units (events, nanoseconds or
// bytes) of communication in contacts: the policy's trajectory.
func (p Policy) Level(progress float64) int {
	level := p.Initial
	if p.Kind != Static {
		dir, span := 1, p.Final-p.Initial
		if span < 0 {
			dir, span = -1, -span
		}
		steps := math.Floor(progress / p.Every)
		level = p.Initial + dir*int(min(steps, float64(span)))
	}
	return max(level, p.Clamp)
}

// Counters are a process's cumulative socket counters.
type Counters struct {
	Events, Bytes uint64
}

// Change is a nice value to set on a process; Restore when it is the
// process's own (the boost is over).
type Change struct {
	PID     int
	Nice    int
	Restore bool
}

// proc is a process the tracker has seen.
type proc struct {
	orig     int // its own nice, given back on reset and undo
	last     Counters
	progress float64   // units counted in contacts (kept under retain)
	since    time.Time // time policies: when it began communicating in this contact
	boosted  bool      // communicated in a contact: holds a level
	nice     int       // what it has now
	fresh    bool      // a contact began: the next counters are a baseline
	// started: it started in a contact under From Start, and counts as
	// communicating in every contact from then on, traffic or not
	// (reset, it is boosted again when the next contact begins).
	started bool
}

// Tracker applies a policy to a lane's processes across contacts.
type Tracker struct {
	p     Policy
	in    bool
	began time.Time // when the contact began
	// down is when the link went down before the contact (the last
	// contact's end, or Down's time); zero when not known. Under From
	// Start a process that started after it counts from its start.
	down  time.Time
	procs map[int]*proc
}

// NewTracker checks the policy and starts outside a contact.
func NewTracker(p Policy) (*Tracker, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	return &Tracker{p: p, procs: map[int]*proc{}}, nil
}

// Policy is the tracker's policy.
func (t *Tracker) Policy() Policy { return t.p }

// InContact reports whether a contact is on.
func (t *Tracker) InContact() bool { return t.in }

// Down tells a tracker outside a contact that the link has been down
// since now (lanesd starting without connectivity), so that under From
// Start a process started while it waits for the first contact counts
// from its start, as one started after a contact's end does. Without it,
// until a contact has ended, only processes started in a contact count.
func (t *Tracker) Down(now time.Time) {
	if !t.in {
		t.down = now
	}
}

// DownSince is when the link went down as the tracker knows it (the last
// contact's end, or Down's time); zero in a contact or when not known.
// lanesd carries it into the tracker of a reloaded config, so that a
// reload does not move the window in which started processes count.
func (t *Tracker) DownSince() time.Time {
	if t.in {
		return time.Time{}
	}
	return t.down
}

// Enter begins a contact. Processes retained from the last one go on
// from their levels; the rest boost when they next communicate.
func (t *Tracker) Enter(now time.Time) {
	if t.in {
		return
	}
	t.in, t.began = true, now
	for _, p := range t.procs {
		// Traffic outside the contact is not the contact's.
		p.fresh = true
		if p.boosted {
			p.since = now.Add(-time.Duration(p.progress))
		}
	}
}

// Leave ends a contact: under reset every boosted process gets its own
// nice back and starts over next time; under retain nothing changes.
func (t *Tracker) Leave(now time.Time) []Change {
	if !t.in {
		return nil
	}
	t.in, t.down = false, now
	if t.p.OnLeave == Retain {
		for _, p := range t.procs {
			if p.boosted && t.p.Step == Time {
				p.progress = float64(now.Sub(p.since))
			}
		}
		return nil
	}
	return t.undo()
}

// Observe takes a process's cumulative counters (orig: its nice value
// now, used the first time the process is seen) and returns the change
// to make, if any. Outside a contact it only records the counters.
func (t *Tracker) Observe(now time.Time, pid, orig int, c Counters) (Change, bool) {
	p, ok := t.procs[pid]
	if !ok {
		t.procs[pid] = &proc{orig: orig, nice: orig, last: c}
		return Change{}, false
	}
	// Counters that went back are a new socket set (or a reused pid):
	// count from them.
	dEvents, dBytes := sub(c.Events, p.last.Events), sub(c.Bytes, p.last.Bytes)
	p.last = c
	if !t.in || p.fresh {
		p.fresh = false
		return Change{}, false
	}
	moved := dEvents > 0 || dBytes > 0 || p.started
	if !p.boosted {
		if !moved {
			return Change{}, false
		}
		p.boosted = true
		p.since = now
		// The step that woke it is the first of its progress.
	}
	switch t.p.Step {
	case Events:
		p.progress += float64(dEvents)
	case Bytes:
		p.progress += float64(dBytes)
	case Time:
		p.progress = float64(now.Sub(p.since))
	}
	// A boost never lowers a process below its own priority.
	want := min(t.p.Level(p.progress), p.orig)
	if want == p.nice {
		return Change{}, false
	}
	p.nice = want
	return Change{PID: pid, Nice: want, Restore: want == p.orig}, true
}

// Started is Observe for a process the tracker has not seen, which
// started at started. Under a policy whose boosts count from a process's
// start (From Start), one that started in the contact, or while the link
// was down before it (since the last contact ended, or since Down), is
// boosted at once, as if its first event had come at its start: its
// level is the policy's at no progress (time counts from its start, or
// from the contact's if it started before). It counts as communicating
// in later contacts too: under reset it is boosted again at the second
// observation of the next one (the first is the contact's baseline),
// traffic or not. Otherwise, and for a process already seen, it is
// Observe.
func (t *Tracker) Started(now, started time.Time, pid, orig int, c Counters) (Change, bool) {
	from := t.began
	if !t.down.IsZero() {
		from = t.down
	}
	if _, seen := t.procs[pid]; seen || t.p.From != Start || !t.in || started.Before(from) {
		return t.Observe(now, pid, orig, c)
	}
	since := started
	if since.Before(t.began) {
		since = t.began
	}
	p := &proc{orig: orig, nice: orig, last: c, boosted: true, since: since, started: true}
	t.procs[pid] = p
	if t.p.Step == Time {
		p.progress = float64(now.Sub(since))
	}
	want := min(t.p.Level(p.progress), p.orig)
	if want == p.nice {
		return Change{}, false
	}
	p.nice = want
	return Change{PID: pid, Nice: want}, true
}

func sub(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return a - b
}

// Seen reports whether the tracker knows the process (Observe needs its
// own nice only the first time).
func (t *Tracker) Seen(pid int) bool { _, ok := t.procs[pid]; return ok }

// PIDs lists the processes the tracker knows.
func (t *Tracker) PIDs() []int {
	out := make([]int, 0, len(t.procs))
	for pid := range t.procs {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// Forget drops a process that exited or left the lane; leaving the lane
// alive, it gets its own nice back (the returned change).
func (t *Tracker) Forget(pid int) (Change, bool) {
	p, ok := t.procs[pid]
	if !ok {
		return Change{}, false
	}
	delete(t.procs, pid)
	if p.nice == p.orig {
		return Change{}, false
	}
	return Change{PID: pid, Nice: p.orig, Restore: true}, true
}

// Undo gives every boosted process its own nice back and forgets all
// progress: for lanesd stopping and the policy changing.
func (t *Tracker) Undo() []Change {
	t.in = false
	return t.undo()
}

func (t *Tracker) undo() []Change {
	var out []Change
	for pid, p := range t.procs {
		if p.nice != p.orig {
			out = append(out, Change{PID: pid, Nice: p.orig, Restore: true})
			p.nice = p.orig
		}
		p.boosted, p.progress = false, 0
	}
	slices.SortFunc(out, func(a, b Change) int { return a.PID - b.PID })
	return out
}

// Boosted is a boosted process as lanes status shows it.
type Boosted struct {
	PID      int     `json:"pid"`
	Nice     int     `json:"nice"`
	Orig     int     `json:"orig_nice"`
	Progress float64 `json:"progress"`
}

// Boosted lists the processes holding a boost, by pid.
func (t *Tracker) Boosted() []Boosted {
	var out []Boosted
	for pid, p := range t.procs {
		if p.nice != p.orig {
			out = append(out, Boosted{PID: pid, Nice: p.nice, Orig: p.orig, Progress: p.progress})
		}
	}
	slices.SortFunc(out, func(a, b Boosted) int { return a.PID - b.PID })
	return out
}

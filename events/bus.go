package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DropPolicy says what a full subscription queue does with one more event.
type DropPolicy int

const (
	// DropNewest keeps what is queued and drops the new event (the
	// default: a subscriber sees an unbroken prefix and learns from the
	// drop count that it fell behind).
	DropNewest DropPolicy = iota
	// DropOldest drops the oldest queued event to make room (a subscriber
	// that wants the latest state: monitors' samples).
	DropOldest
)

func (p DropPolicy) String() string {
	switch p {
	case DropNewest:
		return "drop-newest"
	case DropOldest:
		return "drop-oldest"
	}
	return fmt.Sprintf("DropPolicy(%d)", int(p))
}

// ParseDropPolicy reads "drop-newest" or "drop-oldest" ("" is drop-newest).
func ParseDropPolicy(s string) (DropPolicy, error) {
	switch s {
	case "", "drop-newest":
		return DropNewest, nil
	case "drop-oldest":
		return DropOldest, nil
	}
	return 0, fmt.Errorf("drop policy %q: want drop-newest or drop-oldest", s)
}

// Queue sizes: DefaultQueue when Options.Queue is 0, at most MaxQueue.
const (
	DefaultQueue = 1024
	MaxQueue     = 1 << 20
)

// Options describe a subscription.
type Options struct {
	// Name identifies the subscriber in statistics ("placer",
	// "controller/video", "api/1234").
	Name string
	// Topics are the patterns subscribed to (at least one).
	Topics []string
	// Out is a CEL filter run by the publisher before the event is queued;
	// In one run by the subscriber before it is handed over. Empty: none.
	Out, In string
	// Queue is the queue's bound in events (DefaultQueue when 0).
	Queue int
	// Drop is what a full queue does.
	Drop DropPolicy
}

// Stats are a subscription's counters.
type Stats struct {
	Name   string     `json:"name"`
	Topics []string   `json:"topics"`
	Queue  int        `json:"queue"`
	Drop   DropPolicy `json:"-"`
	// Queued is how many events wait now.
	Queued int `json:"queued"`
	// Delivered were handed to the subscriber; Dropped did not fit its
	// queue; Expired were past their deadline when taken; Filtered were
	// refused by a filter; FilterErrors failed to evaluate (a missing
	// payload key, the cost limit) and were not delivered.
	Delivered    uint64 `json:"delivered"`
	Dropped      uint64 `json:"dropped"`
	Expired      uint64 `json:"expired"`
	Filtered     uint64 `json:"filtered"`
	FilterErrors uint64 `json:"filter_errors"`
}

// ErrClosed is returned by Next once the subscription (or its bus) is
// closed and its queue has been drained.
var ErrClosed = errors.New("events: subscription closed")

// Bus is one host's event channels. The zero value is not usable: New.
type Bus struct {
	seq       atomic.Uint64
	published atomic.Uint64
	invalid   atomic.Uint64
	now       func() time.Time

	mu     sync.Mutex // serialises Subscribe/Close; readers use snap
	snap   atomic.Pointer[snapshot]
	closed bool
	// hooks are called after each change of the subscriptions (OnChange).
	hooks  map[int]func()
	nhooks int
}

// snapshot is the subscription list, replaced (never changed) when a
// subscription comes or goes, with a cache of which subscriptions a topic
// reaches.
type snapshot struct {
	subs   []*Subscription
	routes sync.Map // topic → []*Subscription
	nroute atomic.Int64
}

// maxRoutes bounds the route cache (topics may carry PIDs).
const maxRoutes = 8192

// New returns an empty bus.
func New() *Bus {
	b := &Bus{now: time.Now}
	b.snap.Store(&snapshot{})
	return b
}

// Publish puts an event on the bus and returns its sequence number. It
// never waits for a subscriber: every subscription whose patterns match
// and whose OUT filter passes gets it queued, or counts it as dropped.
// The payload is shared by every subscriber: nobody may change it after
// Publish. An event with an invalid topic is counted and refused (0).
func (b *Bus) Publish(e Event) uint64 {
	snap := b.snap.Load()
	var subs []*Subscription
	if r, ok := snap.routes.Load(e.Topic); ok {
		subs = r.([]*Subscription)
	} else {
		if ValidateTopic(e.Topic) != nil {
			b.invalid.Add(1)
			return 0
		}
		for _, s := range snap.subs {
			if matchAny(s.topics, e.Topic) {
				subs = append(subs, s)
			}
		}
		if snap.nroute.Add(1) <= maxRoutes {
			snap.routes.Store(e.Topic, subs)
		}
	}
	e.Seq = b.seq.Add(1)
	if e.Time.IsZero() {
		e.Time = b.now()
	}
	b.published.Add(1)
	for _, s := range subs {
		s.offer(&e)
	}
	return e.Seq
}

// Subscribe adds a subscription. Its filters are compiled here: an error
// names the filter and the expression's position.
func (b *Bus) Subscribe(o Options) (*Subscription, error) {
	s, err := newSubscription(o)
	if err != nil {
		return nil, err
	}
	s.bus = b
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	old := b.snap.Load()
	subs := append(append([]*Subscription(nil), old.subs...), s)
	b.snap.Store(&snapshot{subs: subs})
	hooks := b.hookList()
	b.mu.Unlock()
	for _, f := range hooks {
		f()
	}
	return s, nil
}

// hookList copies the hooks; b.mu is held.
func (b *Bus) hookList() []func() {
	if len(b.hooks) == 0 {
		return nil
	}
	l := make([]func(), 0, len(b.hooks))
	for _, f := range b.hooks {
		l = append(l, f)
	}
	return l
}

// OnChange calls f after every Subscribe and every subscription's Close,
// outside the bus's lock, in the goroutine that made the change; stop
// removes it. A publisher whose events cost something to make (the proc
// connector's forks) uses it with Interested to make them only while
// someone listens. Two changes may call f concurrently: f must read the
// state it acts on (Interested) itself, under its own lock.
func (b *Bus) OnChange(f func()) (stop func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hooks == nil {
		b.hooks = map[int]func(){}
	}
	id := b.nhooks
	b.nhooks++
	b.hooks[id] = f
	return func() {
		b.mu.Lock()
		delete(b.hooks, id)
		b.mu.Unlock()
	}
}

// Interested reports whether any subscription's patterns match topic (its
// filters are not asked: they see only events that exist).
func (b *Bus) Interested(topic string) bool {
	for _, s := range b.snap.Load().subs {
		if matchAny(s.topics, topic) {
			return true
		}
	}
	return false
}

func (b *Bus) remove(s *Subscription) {
	b.mu.Lock()
	old := b.snap.Load()
	subs := make([]*Subscription, 0, len(old.subs))
	for _, x := range old.subs {
		if x != s {
			subs = append(subs, x)
		}
	}
	b.snap.Store(&snapshot{subs: subs})
	hooks := b.hookList()
	b.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// Close closes every subscription; later Subscribe calls fail.
func (b *Bus) Close() {
	b.mu.Lock()
	b.closed = true
	subs := b.snap.Load().subs
	b.snap.Store(&snapshot{})
	b.mu.Unlock()
	for _, s := range subs {
		s.close()
	}
}

// BusStats are the bus's counters and its subscriptions'.
type BusStats struct {
	Published     uint64  `json:"published"`
	InvalidTopics uint64  `json:"invalid_topics"`
	Subscriptions []Stats `json:"subscriptions"`
}

// Stats returns the bus's counters and every subscription's.
func (b *Bus) Stats() BusStats {
	st := BusStats{Published: b.published.Load(), InvalidTopics: b.invalid.Load()}
	for _, s := range b.snap.Load().subs {
		st.Subscriptions = append(st.Subscriptions, s.Stats())
	}
	return st
}

// Subscription is one subscriber's queue on a bus.
type Subscription struct {
	bus    *Bus
	name   string
	topics []string
	out    *Filter
	in     *Filter
	policy DropPolicy

	mu      sync.Mutex
	buf     []Event
	head, n int
	closed  bool
	notify  chan struct{}

	delivered, dropped, expired, filtered, filterErrors atomic.Uint64
}

func newSubscription(o Options) (*Subscription, error) {
	if len(o.Topics) == 0 {
		return nil, errors.New("subscription has no topics")
	}
	for _, t := range o.Topics {
		if err := ValidatePattern(t); err != nil {
			return nil, err
		}
	}
	q := o.Queue
	switch {
	case q == 0:
		q = DefaultQueue
	case q < 0 || q > MaxQueue:
		return nil, fmt.Errorf("queue of %d events: want 1..%d", q, MaxQueue)
	}
	if o.Drop != DropNewest && o.Drop != DropOldest {
		return nil, fmt.Errorf("unknown drop policy %d", int(o.Drop))
	}
	s := &Subscription{
		name:   o.Name,
		topics: append([]string(nil), o.Topics...),
		policy: o.Drop,
		buf:    make([]Event, q),
		notify: make(chan struct{}, 1),
	}
	var err error
	if o.Out != "" {
		if s.out, err = CompileFilter(o.Out); err != nil {
			return nil, fmt.Errorf("out filter: %w", err)
		}
	}
	if o.In != "" {
		if s.in, err = CompileFilter(o.In); err != nil {
			return nil, fmt.Errorf("in filter: %w", err)
		}
	}
	return s, nil
}

// offer queues e, or counts it filtered or dropped. It never blocks on
// the subscriber: the lock is held only to copy the event in.
func (s *Subscription) offer(e *Event) {
	if s.out != nil {
		ok, err := s.out.Match(e)
		if err != nil {
			s.filterErrors.Add(1)
			return
		}
		if !ok {
			s.filtered.Add(1)
			return
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.n == len(s.buf) {
		if s.policy == DropNewest {
			s.mu.Unlock()
			s.dropped.Add(1)
			return
		}
		s.buf[s.head] = Event{}
		s.head = (s.head + 1) % len(s.buf)
		s.n--
		s.dropped.Add(1)
	}
	s.buf[(s.head+s.n)%len(s.buf)] = *e
	s.n++
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Next returns the next event that is within its deadline and passes the
// IN filter, waiting for one until ctx ends. After Close it returns what
// is still queued, then ErrClosed.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		e, ok, closed := s.pop()
		if ok {
			if s.deliverable(&e) {
				return e, nil
			}
			continue
		}
		if closed {
			return Event{}, ErrClosed
		}
		select {
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-s.notify:
		}
	}
}

// TryNext is Next without waiting: ok is false when nothing deliverable is
// queued.
func (s *Subscription) TryNext() (Event, bool) {
	for {
		e, ok, _ := s.pop()
		if !ok {
			return Event{}, false
		}
		if s.deliverable(&e) {
			return e, true
		}
	}
}

func (s *Subscription) pop() (e Event, ok, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return Event{}, false, s.closed
	}
	e = s.buf[s.head]
	s.buf[s.head] = Event{}
	s.head = (s.head + 1) % len(s.buf)
	s.n--
	return e, true, false
}

func (s *Subscription) deliverable(e *Event) bool {
	if !e.Deadline.IsZero() && s.bus != nil && s.bus.now().After(e.Deadline) {
		s.expired.Add(1)
		return false
	}
	if s.in != nil {
		ok, err := s.in.Match(e)
		if err != nil {
			s.filterErrors.Add(1)
			return false
		}
		if !ok {
			s.filtered.Add(1)
			return false
		}
	}
	s.delivered.Add(1)
	return true
}

// Close removes the subscription from its bus. Events already queued can
// still be taken; then Next returns ErrClosed.
func (s *Subscription) Close() {
	if s.bus != nil {
		s.bus.remove(s)
	}
	s.close()
}

func (s *Subscription) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Stats returns the subscription's counters.
func (s *Subscription) Stats() Stats {
	s.mu.Lock()
	queued := s.n
	s.mu.Unlock()
	return Stats{
		Name: s.name, Topics: s.topics, Queue: len(s.buf), Drop: s.policy, Queued: queued,
		Delivered: s.delivered.Load(), Dropped: s.dropped.Load(), Expired: s.expired.Load(),
		Filtered: s.filtered.Load(), FilterErrors: s.filterErrors.Load(),
	}
}

// Name is the subscription's name.
func (s *Subscription) Name() string { return s.name }

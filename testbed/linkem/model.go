package linkem

import (
	"math/rand/v2"
	"time"
)

// Verdict is what the link does with an arriving packet.
type Verdict int

const (
	Accepted Verdict = iota // queued; leaves at the returned time
	Lost                    // lost on arrival (random or burst loss)
	Dropped                 // dropped at the tail of a full queue
)

// Model is the exact discrete-event model of one direction: given each
// packet's arrival time and size, it says whether the packet is lost,
// dropped or when it is delivered. Arrivals must come in non-decreasing
// time order. The Model is not safe for concurrent use.
type Model struct {
	cfg      Config
	rng      *rand.Rand
	bad      bool // Gilbert–Elliott state
	finish   time.Duration
	queue    []queued // packets not yet fully serialized, oldest first
	head     int
	qBytes   int
	opp      int64 // trace: current opportunity index
	credit   int   // trace: bytes left at opportunity opp
	maxQueue int
	// origin is the time the trace and the schedule count from
	// (SetOrigin): the link's own time at now is now − origin.
	origin time.Duration
}

type queued struct {
	finish time.Duration
	size   int
}

// NewModel returns the model of cfg, which must be valid.
func NewModel(cfg Config) *Model {
	if cfg.QueuePackets == 0 && cfg.QueueBytes == 0 {
		cfg.QueuePackets = 1000
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = 1
	}
	m := &Model{cfg: cfg, rng: rand.New(rand.NewPCG(seed, 0x6c696e6b656d)), opp: -1}
	return m
}

// Arrive accounts a packet of size bytes arriving at now and returns its
// verdict and, when accepted, its delivery time.
func (m *Model) Arrive(now time.Duration, size int) (Verdict, time.Duration) {
	if m.lose() {
		return Lost, 0
	}
	for m.head < len(m.queue) && m.queue[m.head].finish <= now {
		m.qBytes -= m.queue[m.head].size
		m.head++
	}
	if m.head > 1024 && m.head*2 > len(m.queue) {
		m.queue = append(m.queue[:0], m.queue[m.head:]...)
		m.head = 0
	}
	n := len(m.queue) - m.head
	if (m.cfg.QueuePackets > 0 && n >= m.cfg.QueuePackets) ||
		(m.cfg.QueueBytes > 0 && m.qBytes+size > m.cfg.QueueBytes) {
		return Dropped, 0
	}
	var fin time.Duration
	switch {
	case m.cfg.Trace != nil:
		fin = m.origin + m.serveTrace(now-m.origin, size)
	case m.cfg.Rate > 0:
		start := max(now, m.finish)
		if m.cfg.Schedule != nil {
			start = m.origin + m.cfg.Schedule.NextUp(start-m.origin)
		}
		fin = start + time.Duration(float64(size)*8/float64(m.cfg.Rate)*1e9)
	default:
		fin = now
		if m.cfg.Schedule != nil {
			fin = max(m.origin+m.cfg.Schedule.NextUp(now-m.origin), m.finish)
		}
	}
	m.finish = fin
	m.queue = append(m.queue, queued{fin, size})
	m.qBytes += size
	if n+1 > m.maxQueue {
		m.maxQueue = n + 1
	}
	return Accepted, fin + m.cfg.Delay
}

// SetOrigin makes the trace and the schedule start afresh at o: a packet
// arriving at now meets them at now − o. The queue stays as it is (its
// packets keep their delivery times), and a trace's next packet takes
// the first opportunity at or after its arrival on the new time, or
// after the queue's last packet leaves if that is later.
func (m *Model) SetOrigin(o time.Duration) {
	if o == m.origin {
		return
	}
	m.origin, m.opp, m.credit = o, -1, 0
}

// serveTrace spends the trace's opportunities on a packet that arrives at
// now (on the trace's time) and returns when its last byte leaves. Credit
// left at an opportunity with nothing queued is lost, as in Mahimahi.
func (m *Model) serveTrace(now time.Duration, size int) time.Duration {
	t := m.cfg.Trace
	if m.opp < 0 || t.at(m.opp) < now || m.credit == 0 {
		switch {
		case m.opp < 0:
			m.opp = t.firstAtOrAfter(max(now, m.finish-m.origin))
		case t.at(m.opp) < now:
			m.opp = t.firstAtOrAfter(now)
		default:
			m.opp++
		}
		m.credit = TraceMTU
		m.skipDown()
	}
	need := size
	for {
		take := min(need, m.credit)
		need -= take
		m.credit -= take
		if need == 0 {
			return t.at(m.opp)
		}
		m.opp++
		m.credit = TraceMTU
		m.skipDown()
	}
}

// skipDown moves the current opportunity past the schedule's down times.
func (m *Model) skipDown() {
	if m.cfg.Schedule == nil {
		return
	}
	t := m.cfg.Trace
	for {
		at := t.at(m.opp)
		up := m.cfg.Schedule.NextUp(at)
		if up == at {
			return
		}
		m.opp = t.firstAtOrAfter(up)
	}
}

func (m *Model) lose() bool {
	lost := m.cfg.Loss > 0 && m.rng.Float64() < m.cfg.Loss
	if g := m.cfg.Burst; g != nil {
		p := g.LossGood
		if m.bad {
			p = g.LossBad
		}
		if p > 0 && m.rng.Float64() < p {
			lost = true
		}
		if m.bad {
			m.bad = m.rng.Float64() >= g.R
		} else {
			m.bad = m.rng.Float64() < g.P
		}
	}
	return lost
}

// MaxQueue is the largest queue length (packets) seen so far.
func (m *Model) MaxQueue() int { return m.maxQueue }

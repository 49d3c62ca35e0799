package pacer

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/dwcs"
)

// Stream is one periodic sender's stream.
type Stream struct {
	Name string
	// Period is T: one frame every period (the producing CPU period).
	Period time.Duration
	// Packets is C: the most packets of a frame, each one slot.
	Packets int
	// X of every Y consecutive frames may miss (0/0: none may).
	X, Y int
	// Phase is Θ: the packet periods run this far behind the CPU periods.
	Phase time.Duration
}

// LMax is the latest a packet of a met frame starts after its frame's
// release: Θ + T.
func (s Stream) LMax() time.Duration { return s.Phase + s.Period }

// Config is a pacer's link slot and streams.
type Config struct {
	// Slot is one packet's time on the link: its size in bits over the
	// rate the pacer may send at (1200 bytes at 9.6 Mbit/s: 1 ms).
	Slot    time.Duration
	Streams []Stream
}

// Bounds of a slot.
const (
	MinSlot = 50 * time.Microsecond
	MaxSlot = time.Second
)

// Check says what is wrong with the config, naming the stream and field.
func (c Config) Check() error {
	if c.Slot < MinSlot || c.Slot > MaxSlot {
		return fmt.Errorf("slot %v is outside %v..%v", c.Slot, MinSlot, MaxSlot)
	}
	if len(c.Streams) == 0 {
		return errors.New("no streams")
	}
	for i, s := range c.Streams {
		name := s.Name
		if name == "" {
			name = fmt.Sprintf("stream %d", i)
		}
		switch {
		case s.Period <= 0 || s.Period%c.Slot != 0:
			return fmt.Errorf("%s: period %v is not a positive multiple of the slot %v", name, s.Period, c.Slot)
		case s.Phase < 0 || s.Phase%c.Slot != 0:
			return fmt.Errorf("%s: phase %v is not a multiple of the slot %v (0 or more)", name, s.Phase, c.Slot)
		case s.Packets <= 0:
			return fmt.Errorf("%s: %d packets a frame: want at least 1", name, s.Packets)
		}
		ds := s.dwcs(c.Slot)
		ds.Name = name
		if err := ds.Check(); err != nil {
			return err // it names the stream
		}
	}
	return nil
}

// dwcs is the stream as the scheduler counts it, in slots.
func (s Stream) dwcs(slot time.Duration) dwcs.Stream {
	return dwcs.Stream{Name: s.Name, Period: int64(s.Period / slot), Service: int64(s.Packets),
		X: s.X, Y: s.Y, Phase: int64(s.Phase / slot)}
}

// MinUtilization is the share of the link the streams need at least
// (DWCS's feasibility: at most 1).
func (c Config) MinUtilization() float64 {
	ss := make([]dwcs.Stream, len(c.Streams))
	for i, s := range c.Streams {
		ss[i] = s.dwcs(c.Slot)
	}
	return dwcs.MinUtilization(ss)
}

// Stats is what one stream got.
type Stats struct {
	// Frames whose packet period ended, Met those sent whole by their
	// deadline, Missed the others.
	Frames, Met, Missed int64
	// Windows of Y consecutive frames (from the first) and those with
	// more than X misses, counted on the outcomes alone.
	Windows, WindowViolations int64
	// MaxMissRun is the longest run of consecutive missed frames.
	MaxMissRun int64
	// Sent packets; Dropped, left unsent at their period's end; Late,
	// enqueued after their frame's period had ended; Over, beyond the
	// frame's C packets.
	Sent, Dropped, Late, Over int64
	// MaxStart is the latest a sent packet started after its frame's
	// release (k·T), at slot resolution.
	MaxStart time.Duration
}

// packet is a queued packet of frame.
type packet struct {
	frame int64
	data  []byte
}

// Pacer is DWCS over a link's slots for a fixed set of streams. Enqueue
// may be called from any goroutine; Step from one.
type Pacer struct {
	cfg Config
	mu  sync.Mutex
	sc  *dwcs.Scheduler
	q   [][]packet // per stream, by frame then arrival
	// inFrame counts the packets enqueued for each stream's newest frame.
	newest  []int64
	inFrame []int
	st      []Stats
	inWin   []int64
	missWin []int64
	run     []int64
}

// New checks cfg and starts a pacer at slot 0 (every stream's CPU period
// 0 begins then).
func New(cfg Config) (*Pacer, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	ss := make([]dwcs.Stream, len(cfg.Streams))
	for i, s := range cfg.Streams {
		ss[i] = s.dwcs(cfg.Slot)
	}
	sc, err := dwcs.New(ss)
	if err != nil {
		return nil, err
	}
	n := len(ss)
	p := &Pacer{cfg: cfg, sc: sc, q: make([][]packet, n), newest: make([]int64, n), inFrame: make([]int, n),
		st: make([]Stats, n), inWin: make([]int64, n), missWin: make([]int64, n), run: make([]int64, n)}
	for i := range p.newest {
		p.newest[i] = -1
	}
	return p, nil
}

// Config is the pacer's config.
func (p *Pacer) Config() Config { return p.cfg }

// Enqueue queues a packet of frame (frame k: the one released at k·T)
// on stream i. A packet for a frame whose packet period has ended is
// late: counted and dropped (false). So is one beyond the frame's C.
// Frames come in order: a packet of a frame older than the stream's
// newest is an error.
func (p *Pacer) Enqueue(i int, frame int64, data []byte) (queued bool, err error) {
	if i < 0 || i >= len(p.q) {
		return false, fmt.Errorf("stream %d: there are %d streams", i, len(p.q))
	}
	if frame < 0 {
		return false, fmt.Errorf("stream %d: frame %d is negative", i, frame)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if frame < p.newest[i] {
		return false, fmt.Errorf("stream %d: frame %d after frame %d: frames come in order", i, frame, p.newest[i])
	}
	if frame > p.newest[i] {
		p.newest[i], p.inFrame[i] = frame, 0
	}
	if cur, _, _ := p.sc.Current(i); frame < cur {
		p.st[i].Late++
		return false, nil
	}
	if p.inFrame[i] >= p.cfg.Streams[i].Packets {
		p.st[i].Over++
		return false, nil
	}
	p.inFrame[i]++
	p.q[i] = append(p.q[i], packet{frame: frame, data: data})
	return true, nil
}

// Now is the slot the next Step runs.
func (p *Pacer) Now() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sc.Now()
}

// Step runs one slot: it returns the stream whose packet starts in it
// and the packet (-1, nil: the link idles), and closes the packet
// periods that end with it.
func (p *Pacer) Step() (stream int, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.sc.Now()
	ready := func(i int) bool {
		cur, _, _ := p.sc.Current(i)
		return len(p.q[i]) > 0 && p.q[i][0].frame == cur
	}
	ran, ended := p.sc.StepReady(ready)
	if ran >= 0 {
		pk := p.q[ran][0]
		p.q[ran] = p.q[ran][1:]
		st := &p.st[ran]
		st.Sent++
		release := pk.frame * int64(p.cfg.Streams[ran].Period/p.cfg.Slot)
		st.MaxStart = max(st.MaxStart, time.Duration(now-release)*p.cfg.Slot)
		data = pk.data
	}
	for _, o := range ended {
		p.close(o)
	}
	return ran, data
}

// close tallies a packet period that ended and drops what is left of
// its frame.
func (p *Pacer) close(o dwcs.Outcome) {
	i := o.Stream
	st := &p.st[i]
	q := p.q[i]
	for len(q) > 0 && q[0].frame <= o.Period {
		q = q[1:]
		st.Dropped++
	}
	p.q[i] = q
	st.Frames++
	if o.Met {
		st.Met++
		p.run[i] = 0
	} else {
		st.Missed++
		p.run[i]++
		p.missWin[i]++
		st.MaxMissRun = max(st.MaxMissRun, p.run[i])
	}
	s := p.cfg.Streams[i]
	p.inWin[i]++
	if p.inWin[i] == int64(max(s.Y, 1)) {
		st.Windows++
		if p.missWin[i] > int64(s.X) {
			st.WindowViolations++
		}
		p.inWin[i], p.missWin[i] = 0, 0
	}
}

// Stats returns each stream's figures so far, in the order of the
// config.
func (p *Pacer) Stats() []Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.st)
}

// Coordinated is the CPU side of a stream's coordinated schedule: its
// producing thread's deadline reservation — runtime (the frame's CPU
// work, with margin) in every period T, due Θ after the period's start —
// so that every frame is ready when its packet period begins. A stream
// without a phase has no room for the CPU: deadline 0 is refused.
func Coordinated(s Stream, work time.Duration) (runtime, deadline, period time.Duration, err error) {
	switch {
	case s.Phase <= 0:
		return 0, 0, 0, fmt.Errorf("%s: no phase: the frame's CPU work has no time before its packet period", s.Name)
	case work <= 0 || work > s.Phase:
		return 0, 0, 0, fmt.Errorf("%s: CPU work %v does not fit in the phase %v", s.Name, work, s.Phase)
	}
	return work, s.Phase, s.Period, nil
}

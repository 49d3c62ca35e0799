package intnw

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Ordering constraints and isolation under any arrival order: IROBs with
// random labels, dependencies and sizes, cut into chunks that arrive in a
// random order (paths reorder), some of them twice (a path lost and its
// chunks sent again). Every IROB is delivered once, whole, after each
// IROB it depends on; a background IROB never while a foreground one could
// go.
func TestReceiverProperties(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 42))
		n := 1 + rng.IntN(40)
		type irob struct {
			label  Label
			deps   []uint64
			depAll bool
			data   []byte
		}
		irobs := make([]irob, n+1)
		var chunks []*frame
		for id := 1; id <= n; id++ {
			ir := irob{label: Label(rng.IntN(numLabels)), data: make([]byte, rng.IntN(3)*rng.IntN(40000))}
			for i := range ir.data {
				ir.data[i] = byte(rng.Uint32())
			}
			switch rng.IntN(3) {
			case 0:
				ir.depAll = true
			case 1:
				for d := 1; d < id; d++ {
					if rng.IntN(4) == 0 {
						ir.deps = append(ir.deps, uint64(d))
					}
				}
			}
			irobs[id] = ir
			off := 0
			for first := true; first || off < len(ir.data); first = false {
				sz := min(len(ir.data)-off, 1+rng.IntN(16000))
				f := &frame{typ: tData, label: ir.label, id: uint64(id), off: uint64(off), data: ir.data[off : off+sz]}
				if off == 0 {
					f.deps = ir.deps
					if ir.depAll {
						f.flags |= flagDepAll
					}
				}
				off += sz
				if off == len(ir.data) {
					f.flags |= flagEnd
				}
				chunks = append(chunks, f)
			}
		}
		// Duplicates: a chunk sent again (a path's in-flight data), maybe
		// after its IROB was delivered.
		for range rng.IntN(len(chunks) + 1) {
			chunks = append(chunks, chunks[rng.IntN(len(chunks))])
		}
		rng.Shuffle(len(chunks), func(i, j int) { chunks[i], chunks[j] = chunks[j], chunks[i] })

		r := newReceiver()
		delivered := map[uint64]int{} // id → position
		var order []uint64
		deliver := func() {
			for {
				// A foreground IROB must not be deliverable when a
				// background one is chosen.
				fgReady := false
				for id, ir := range r.irobs {
					if ir.label.Foreground() && r.ready(id, ir) {
						fgReady = true
					}
				}
				m, ok := r.next()
				if !ok {
					return
				}
				if fgReady && !m.Label.Foreground() {
					t.Fatalf("seed %d: background IROB %d delivered while a foreground one was ready", seed, m.ID)
				}
				if _, twice := delivered[m.ID]; twice {
					t.Fatalf("seed %d: IROB %d delivered twice", seed, m.ID)
				}
				want := irobs[m.ID]
				if m.Label != want.label || !bytes.Equal(m.Data, want.data) {
					t.Fatalf("seed %d: IROB %d delivered as %v with %d bytes, want %v with %d", seed, m.ID, m.Label, len(m.Data), want.label, len(want.data))
				}
				for _, d := range want.deps {
					if _, ok := delivered[d]; !ok {
						t.Fatalf("seed %d: IROB %d delivered before IROB %d it depends on", seed, m.ID, d)
					}
				}
				if want.depAll {
					for d := uint64(1); d < m.ID; d++ {
						if _, ok := delivered[d]; !ok {
							t.Fatalf("seed %d: IROB %d (after all) delivered before IROB %d", seed, m.ID, d)
						}
					}
				}
				delivered[m.ID] = len(order)
				order = append(order, m.ID)
			}
		}
		for _, f := range chunks {
			if err := r.chunk(f); err != nil {
				t.Fatalf("seed %d: chunk of IROB %d at %d: %v", seed, f.id, f.off, err)
			}
			if rng.IntN(3) == 0 {
				deliver()
			}
		}
		deliver()
		if len(order) != n {
			missing := []uint64{}
			for id := uint64(1); id <= uint64(n); id++ {
				if _, ok := delivered[id]; !ok {
					missing = append(missing, id)
				}
			}
			t.Fatalf("seed %d: %d of %d IROBs delivered; missing %v", seed, len(order), n, missing)
		}
		if r.buffered != 0 || len(r.irobs) != 0 || r.low != uint64(n) {
			t.Fatalf("seed %d: after delivering all, %d bytes buffered, %d IROBs held, low %d", seed, r.buffered, len(r.irobs), r.low)
		}
	}
}

// Chunks that contradict what came before are refused by name.
func TestReceiverRefuses(t *testing.T) {
	first := &frame{typ: tData, label: BGSmall, id: 2, flags: flagEnd, deps: []uint64{1}, data: []byte("abcd")}
	tests := []struct {
		name string
		next *frame
		want string
	}{
		{"relabelled", &frame{typ: tData, label: FGSmall, id: 2, off: 2, data: []byte("cd")}, "IROB 2: a chunk labelled fg-small after bg-small"},
		{"beyond the end", &frame{typ: tData, label: BGSmall, id: 2, off: 3, data: []byte("de")}, "IROB 2: bytes up to 5 beyond its end at 4"},
		{"two ends", &frame{typ: tData, label: BGSmall, id: 2, off: 0, flags: flagEnd, deps: []uint64{1}, data: []byte("ab")}, "IROB 2: ends at 4 and at 2"},
		{"other dependencies", &frame{typ: tData, label: BGSmall, id: 2, off: 0, deps: []uint64{1}, flags: flagDepAll, data: []byte("ab")}, "IROB 2: its first chunk again with other dependencies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReceiver()
			if err := r.chunk(first); err != nil {
				t.Fatal(err)
			}
			if err := r.chunk(tt.next); err == nil || err.Error() != "intnw: protocol error: "+tt.want {
				t.Errorf("chunk: %v, want %q", err, tt.want)
			}
		})
	}
	// An end below bytes already received.
	r := newReceiver()
	if err := r.chunk(&frame{typ: tData, label: FGLarge, id: 1, off: 10, data: []byte("xyz")}); err != nil {
		t.Fatal(err)
	}
	if err := r.chunk(&frame{typ: tData, label: FGLarge, id: 1, off: 0, flags: flagEnd, data: []byte("ab")}); err == nil {
		t.Error("an end at 2 below bytes up to 13 was taken")
	}
}

// The sender puts what a lost path had in flight back at the head of the
// queues, in the order it was cut, and acknowledgements free it.
func TestSenderRequeue(t *testing.T) {
	s := newSender()
	a := &sirob{id: 1, label: BGLarge}
	b := &sirob{id: 2, label: BGLarge}
	s.write(a, make([]byte, 40<<10), -1) // 3 chunks of 16 KiB, 16 KiB, 8 KiB
	s.end(a)
	s.write(b, make([]byte, 10), -1)
	if len(s.queues[BGLarge]) != 4 || !s.queues[BGLarge][2].end {
		t.Fatalf("queued %d chunks (the third ending IROB 1: %v), want 4", len(s.queues[BGLarge]), s.queues[BGLarge][2].end)
	}
	c0 := s.take(BGLarge, 0, 0)
	c1 := s.take(BGLarge, 1, 0)
	c2 := s.take(BGLarge, 0, 0)
	if s.ack(ackEntry{ID: 1, Off: c1.off, Len: uint32(len(c1.data))}) == nil {
		t.Fatal("ack of a chunk in flight not taken")
	}
	if s.ack(ackEntry{ID: 1, Off: c1.off, Len: uint32(len(c1.data))}) != nil {
		t.Fatal("an ack taken twice")
	}
	if n := s.requeue(0); n != 2 {
		t.Fatalf("requeue: %d chunks, want 2", n)
	}
	q := s.queues[BGLarge]
	if len(q) != 3 || q[0] != c0 || q[1] != c2 || q[2].ir != b || c0.path != -1 {
		t.Fatalf("queue after requeue: %v", q)
	}
	if got := slices.IndexFunc(q, func(c *chunk) bool { return c.end }); got != 1 {
		t.Errorf("the end chunk at %d, want 1", got)
	}
	// An IROB ended after its data went out ends in a chunk of no bytes.
	s.take(BGLarge, 0, 0)
	s.take(BGLarge, 0, 0)
	last := s.take(BGLarge, 0, 0)
	s.end(b)
	if last.end || len(s.queues[BGLarge]) != 1 || !s.queues[BGLarge][0].end || len(s.queues[BGLarge][0].data) != 0 || s.queues[BGLarge][0].off != 10 {
		t.Errorf("End after the data left: queue %v", s.queues[BGLarge])
	}
}

// A chunk longer than a path's room is cut: the piece goes, carrying the
// IROB's dependencies when it starts it; the rest stays first in the
// queue with the end mark; each is acknowledged on its own.
func TestSenderCut(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size      int
		most      int
		wantPiece int
	}{
		{"longer than the room", 16 << 10, 4000, 4000},
		{"shorter than the room", 3000, 4000, 3000},
		{"no limit", 16 << 10, 0, 16 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSender()
			ir := &sirob{id: 1, label: BGLarge, deps: []uint64{7}, want: -1}
			data := make([]byte, tc.size)
			for i := range data {
				data[i] = byte(i)
			}
			s.write(ir, data, -1)
			s.end(ir)
			piece := s.take(BGLarge, 0, tc.most)
			if len(piece.data) != tc.wantPiece || piece.off != 0 || piece.path != 0 {
				t.Fatalf("piece: %d bytes at %d on path %d, want %d at 0 on 0", len(piece.data), piece.off, piece.path, tc.wantPiece)
			}
			if f := piece.frame(); !slices.Equal(f.deps, []uint64{7}) || !slices.Equal(f.data, data[:tc.wantPiece]) {
				t.Errorf("piece's frame: deps %v, %d bytes", f.deps, len(f.data))
			}
			rest := tc.size - tc.wantPiece
			if got := s.bytes[BGLarge]; got != rest {
				t.Errorf("queued bytes after the cut: %d, want %d", got, rest)
			}
			if rest == 0 {
				if !piece.end || s.queued(BGLarge) {
					t.Errorf("the whole chunk taken: end %v, still queued %v", piece.end, s.queued(BGLarge))
				}
				return
			}
			if piece.end {
				t.Error("the piece carries the end mark")
			}
			head := s.queues[BGLarge][0]
			if head.off != uint64(tc.wantPiece) || !head.end || !slices.Equal(head.data, data[tc.wantPiece:]) || head.frame().deps != nil {
				t.Errorf("rest: at %d, end %v, %d bytes, deps %v", head.off, head.end, len(head.data), head.frame().deps)
			}
			second := s.take(BGLarge, 1, 0)
			for _, c := range []*chunk{piece, second} {
				if s.ack(ackEntry{ID: 1, Off: c.off, Len: uint32(len(c.data))}) == nil {
					t.Errorf("ack of %d bytes at %d not taken", len(c.data), c.off)
				}
			}
			if ir.open != 0 || s.unacked != 0 || !s.idle() {
				t.Errorf("after both acks: %d chunks open, %d bytes unacked, idle %v", ir.open, s.unacked, s.idle())
			}
		})
	}
}

func TestFlipFlop(t *testing.T) {
	var f flipFlop
	// Noise around 100: the stable estimate stays near it.
	for i := range 50 {
		f.add(100 + float64(i%5) - 2)
	}
	if v := f.value(); v < 97 || v > 103 {
		t.Fatalf("noise around 100: %g", v)
	}
	// A step to 300: the agile estimate takes over at once.
	v := f.add(300)
	if v < 190 {
		t.Errorf("after a step to 300: %g, want the agile average (>= 190)", v)
	}
	for range 10 {
		v = f.add(300)
	}
	if v < 270 {
		t.Errorf("10 samples after the step: %g", v)
	}
}

// raise takes a rate the path is known to carry as a floor: at once when
// the estimate is below it, not at all when above, and the first sample
// when there is none; a sample after it moves it as any other.
func TestFlipFlopRaise(t *testing.T) {
	for _, tt := range []struct {
		name   string
		before []float64
		raise  float64
		want   float64
	}{
		{"empty", nil, 50, 50},
		{"below", []float64{100, 101, 99, 100}, 130, 130},
		{"above", []float64{100, 101, 99, 100}, 90, 100},
		{"not a number", []float64{100}, math.NaN(), 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var f flipFlop
			for _, x := range tt.before {
				f.add(x)
			}
			if got := f.raise(tt.raise); math.Abs(got-tt.want) > 1.5 {
				t.Errorf("raise(%g) = %g, want %g", tt.raise, got, tt.want)
			}
		})
	}
	var f flipFlop
	f.add(100)
	f.raise(130)
	if v := f.add(130); v != 130 {
		t.Errorf("a sample at the raised value: %g, want 130", v)
	}
}

// The delivered segments' fill scales the kernel's delivery rate, which
// counts each segment as a full MSS: full segments leave it alone, short
// ones bring it down by their payload's share, a read that saw nothing
// changes nothing, and it is never above 1.
func TestSegmentFill(t *testing.T) {
	type read struct {
		acked     uint64
		segs, mss uint32
	}
	for _, tt := range []struct {
		name   string
		reads  []read
		lo, hi float64
	}{
		{"none yet", nil, 1, 1},
		{"full segments", []read{{14480, 10, 1448}, {14480, 10, 1448}}, 1, 1},
		{"half full", []read{{7240, 10, 1448}, {7240, 10, 1448}}, 0.5, 0.5},
		// 26 full segments and 4 pings of 40 bytes a second.
		{"pings among data", []read{{26*1448 + 160, 30, 1448}}, 0.86, 0.88},
		{"nothing delivered", []read{{7240, 10, 1448}, {0, 0, 1448}}, 0.5, 0.5},
		{"unknown mss", []read{{100, 10, 0}}, 1, 1},
		// More bytes than segments × MSS (an MSS that changed): capped.
		{"over", []read{{20000, 10, 1448}}, 1, 1},
		// Old reads fade: half-full segments after a second of full ones.
		{"fading", []read{{7240, 10, 1448}, {14480, 10, 1448}, {14480, 10, 1448}, {14480, 10, 1448},
			{14480, 10, 1448}, {14480, 10, 1448}, {14480, 10, 1448}, {14480, 10, 1448}, {14480, 10, 1448},
			{14480, 10, 1448}, {14480, 10, 1448}, {14480, 10, 1448}, {14480, 10, 1448}, {14480, 10, 1448},
			{14480, 10, 1448}, {14480, 10, 1448}, {14480, 10, 1448}, {14480, 10, 1448}, {14480, 10, 1448},
			{14480, 10, 1448}, {14480, 10, 1448}}, 0.95, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var f segmentFill
			for _, r := range tt.reads {
				f.add(r.acked, r.segs, r.mss)
			}
			if got := f.ratio(); got < tt.lo-1e-9 || got > tt.hi+1e-9 {
				t.Errorf("fill %.3f, want %.2f..%.2f", got, tt.lo, tt.hi)
			}
		})
	}
}

// The anticipatory window: 50 ms right after foreground, doubling every
// second without any, at most a second.
func TestAnticipation(t *testing.T) {
	c := &pathState{lastFG: time.Unix(100, 0)}
	for _, tt := range []struct {
		since time.Duration
		want  time.Duration
	}{{0, 50 * time.Millisecond}, {time.Second, 100 * time.Millisecond}, {2 * time.Second, 200 * time.Millisecond},
		{4 * time.Second, 800 * time.Millisecond}, {5 * time.Second, time.Second}, {time.Hour, time.Second}, {-time.Second, 50 * time.Millisecond}} {
		if got := anticipationLocked(c, c.lastFG.Add(tt.since)); got != tt.want {
			t.Errorf("%v after foreground: %v, want %v", tt.since, got, tt.want)
		}
	}
}

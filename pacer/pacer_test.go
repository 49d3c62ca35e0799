package pacer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestCheck(t *testing.T) {
	ok := Stream{Name: "a", Period: 30 * ms, Packets: 4, X: 1, Y: 4, Phase: 15 * ms}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"fine", Config{Slot: ms, Streams: []Stream{ok}}, ""},
		{"slot too short", Config{Slot: time.Microsecond, Streams: []Stream{ok}}, "slot 1µs is outside"},
		{"no streams", Config{Slot: ms}, "no streams"},
		{"period off the slots", Config{Slot: 4 * ms, Streams: []Stream{ok}}, "a: period 30ms is not a positive multiple of the slot 4ms"},
		{"phase off the slots", Config{Slot: ms, Streams: []Stream{{Name: "b", Period: 30 * ms, Packets: 1, Phase: 1500 * time.Microsecond}}}, "b: phase 1.5ms is not a multiple"},
		{"no packets", Config{Slot: ms, Streams: []Stream{{Period: 30 * ms}}}, "stream 0: 0 packets a frame"},
		{"more packets than slots", Config{Slot: ms, Streams: []Stream{{Name: "c", Period: 3 * ms, Packets: 4}}}, "c: service 4 longer than the period 3"},
		{"x not below y", Config{Slot: ms, Streams: []Stream{{Name: "d", Period: 30 * ms, Packets: 1, X: 4, Y: 4}}}, "window constraint 4/4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Check()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v, want %q", err, tt.want)
			}
			if _, err := New(tt.cfg); err == nil {
				t.Fatal("New took a config Check refuses")
			}
		})
	}
}

// steps runs n slots and returns which stream sent in each (-1: idle).
func steps(p *Pacer, n int) []int {
	out := make([]int, n)
	for k := range out {
		out[k], _ = p.Step()
	}
	return out
}

// A frame waits for its packet period: Θ after its release; its
// packets' latencies are counted from the release.
func TestPhaseDelaysTheFrame(t *testing.T) {
	p, err := New(Config{Slot: ms, Streams: []Stream{{Name: "v", Period: 10 * ms, Packets: 2, Phase: 5 * ms}}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if q, err := p.Enqueue(0, 0, []byte("x")); !q || err != nil {
			t.Fatalf("Enqueue: %v %v", q, err)
		}
	}
	got := steps(p, 10)
	want := []int{-1, -1, -1, -1, -1, 0, 0, -1, -1, -1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("slots %v, want %v", got, want)
		}
	}
	st := p.Stats()[0]
	if mx := st.MaxStart; st.Sent != 2 || mx != 6*ms {
		t.Errorf("sent %d, latest start %v after the release; want 2 and 6ms", st.Sent, mx)
	}
	steps(p, 5) // the packet period ends at 15
	if st = p.Stats()[0]; st.Frames != 1 || st.Met != 1 {
		t.Errorf("frames %d met %d, want 1 and 1", st.Frames, st.Met)
	}
}

func TestLateDroppedOver(t *testing.T) {
	cfg := Config{Slot: ms, Streams: []Stream{{Name: "v", Period: 10 * ms, Packets: 2, X: 1, Y: 2}}}
	p, _ := New(cfg)
	steps(p, 9)
	// Frame 0 arrives in its period's last slot: one packet goes, the
	// other is dropped at the deadline; the frame missed.
	p.Enqueue(0, 0, nil)
	p.Enqueue(0, 0, nil)
	if q, _ := p.Enqueue(0, 0, nil); q {
		t.Error("a third packet of a 2-packet frame was queued")
	}
	steps(p, 1)
	st := p.Stats()[0]
	if st.Sent != 1 || st.Dropped != 1 || st.Missed != 1 || st.Over != 1 {
		t.Errorf("%+v: want 1 sent, 1 dropped, 1 missed, 1 over", st)
	}
	// Frame 0 again, after its period: late.
	if q, err := p.Enqueue(0, 0, nil); q || err != nil {
		t.Errorf("Enqueue of a frame whose period ended: %v %v, want not queued", q, err)
	}
	if _, err := p.Enqueue(0, 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(0, 1, nil); err == nil || !strings.Contains(err.Error(), "frames come in order") {
		t.Errorf("an older frame after a newer: %v", err)
	}
	if _, err := p.Enqueue(3, 0, nil); err == nil {
		t.Error("an unknown stream was taken")
	}
	if st = p.Stats()[0]; st.Late != 1 {
		t.Errorf("late %d, want 1", st.Late)
	}
}

// The seed's coordinated schedule, simulated: random feasible stream
// sets on one period (DWCS's guarantee), each frame ready at a random
// time its CPU deadline allows. With the packet periods Θ behind and the
// CPU due within Θ, no window is violated and no packet starts later than
// Θ + T after its frame's release; the same frames with no phase (the
// packet period the CPU period) miss.
func TestCoordinatedGuarantee(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const frames = 200
	var missedNoPhase int64
	for set := range 100 {
		period := time.Duration(10+rng.IntN(40)) * ms
		phase := time.Duration(1+rng.IntN(int(period/ms)-1)) * ms
		n := 1 + rng.IntN(5)
		var streams []Stream
		budget := int(period / ms)
		for i := range n {
			y := 1 + rng.IntN(5)
			x := rng.IntN(y)
			c := 1 + rng.IntN(max(1, budget/n))
			streams = append(streams, Stream{Name: string(rune('a' + i)), Period: period, Packets: c, X: x, Y: y, Phase: phase})
		}
		cfg := Config{Slot: ms, Streams: streams}
		for cfg.MinUtilization() > 1 {
			i := rng.IntN(n)
			if streams[i].Packets > 1 {
				streams[i].Packets--
			} else if streams[i].X+1 < streams[i].Y {
				streams[i].X++
			}
		}
		// Each frame is ready somewhere in [release, release + Θ].
		ready := make([][]int64, n)
		for i := range ready {
			ready[i] = make([]int64, frames)
			for k := range ready[i] {
				ready[i][k] = int64(k)*int64(period/ms) + rng.Int64N(int64(phase/ms)+1)
			}
		}
		run := func(cfg Config) []Stats {
			p, err := New(cfg)
			if err != nil {
				t.Fatalf("set %d: %v", set, err)
			}
			next := make([]int, n)
			for slot := int64(0); slot < int64(frames)*int64(period/ms); slot++ {
				for i := range n {
					for next[i] < frames && ready[i][next[i]] <= slot {
						for range cfg.Streams[i].Packets {
							p.Enqueue(i, int64(next[i]), nil)
						}
						next[i]++
					}
				}
				p.Step()
			}
			return p.Stats()
		}
		for i, st := range run(cfg) {
			mx := st.MaxStart
			if st.WindowViolations != 0 || st.Late != 0 || mx > streams[i].LMax() {
				t.Fatalf("set %d (min utilisation %.2f) stream %d %+v: %d windows violated, %d late, latest start %v after the release (l_max %v)",
					set, cfg.MinUtilization(), i, streams[i], st.WindowViolations, st.Late, mx, streams[i].LMax())
			}
		}
		noPhase := Config{Slot: ms, Streams: append([]Stream(nil), streams...)}
		for i := range noPhase.Streams {
			noPhase.Streams[i].Phase = 0
		}
		for _, st := range run(noPhase) {
			missedNoPhase += st.Missed
		}
	}
	if missedNoPhase == 0 {
		t.Error("without the phase no frame missed: the sets do not test the phase")
	}
	t.Logf("without the phase the same frames missed %d times", missedNoPhase)
}

func TestCoordinated(t *testing.T) {
	s := Stream{Name: "v", Period: 30 * ms, Packets: 4, Phase: 15 * ms}
	r, d, p, err := Coordinated(s, 4*ms)
	if err != nil || r != 4*ms || d != 15*ms || p != 30*ms || s.LMax() != 45*ms {
		t.Errorf("Coordinated = %v %v %v %v, l_max %v; want 4ms due 15ms every 30ms, 45ms", r, d, p, err, s.LMax())
	}
	if _, _, _, err := Coordinated(Stream{Name: "v", Period: 30 * ms, Packets: 1}, 4*ms); err == nil || !strings.Contains(err.Error(), "no phase") {
		t.Errorf("no phase: %v", err)
	}
	if _, _, _, err := Coordinated(s, 20*ms); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("work beyond the phase: %v", err)
	}
}

package daemon

import "testing"

// The placement queue is bounded: events beyond it are dropped, counted,
// and ask for a rescan; exits beyond it are counted apart.
func TestPlacerQueueBounded(t *testing.T) {
	cases := []struct {
		name                string
		execs, exits        int
		wantDrops, wantExit uint64
		wantRescan          bool
	}{
		{"within the queue", placeQueue, placeQueue, 0, 0, false},
		{"execs beyond it", placeQueue + 7, 0, 7, 0, true},
		{"exits beyond it", 0, placeQueue + 3, 0, 3, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPlacer()
			for i := range c.execs {
				p.exec(i + 1)
			}
			for i := range c.exits {
				p.exit(i + 1)
			}
			if got := p.dropped.Load(); got != c.wantDrops {
				t.Errorf("dropped %d exec events, want %d", got, c.wantDrops)
			}
			if got := p.exitsDropped.Load(); got != c.wantExit {
				t.Errorf("dropped %d exit events, want %d", got, c.wantExit)
			}
			if got := p.rescan.Load(); got != c.wantRescan {
				t.Errorf("rescan %v, want %v", got, c.wantRescan)
			}
			if len(p.execs) != min(c.execs, placeQueue) {
				t.Errorf("%d queued, want %d", len(p.execs), min(c.execs, placeQueue))
			}
		})
	}
}

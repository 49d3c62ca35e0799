package daemon

import (
	"testing"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/monitor"
)

// The placer's subscription is bounded: events beyond it are dropped
// (newest first), counted, and ask for a rescan; an overflow asks for one
// too; exits are kept only for processes lanes recorded.
func TestPlacerQueueBounded(t *testing.T) {
	cases := []struct {
		name               string
		execs, exits       int
		overflow           bool
		wantDrops          uint64
		wantExecs, wantExt int
		wantRescan         bool
	}{
		{"within the queue", placeQueue / 2, placeQueue / 2, false, 0, placeQueue / 2, placeQueue / 4, false},
		{"execs beyond it", placeQueue + 7, 0, false, 7, placeQueue, 0, true},
		{"exits beyond it", 0, placeQueue + 3, false, 3, 0, placeQueue / 2, true},
		{"kernel overflow", 10, 0, true, 0, 10, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bus := events.New()
			defer bus.Close()
			q, err := newPlacerQueue(bus)
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.execs {
				ev, _ := monitor.Event{Kind: monitor.Exec, PID: i + 1, TGID: i + 1}.BusEvent()
				bus.Publish(ev)
			}
			for i := range c.exits {
				ev, _ := monitor.Event{Kind: monitor.Exit, PID: i + 1, TGID: i + 1}.BusEvent()
				bus.Publish(ev)
			}
			if c.overflow {
				ev, _ := monitor.Event{Kind: monitor.Overflow}.BusEvent()
				bus.Publish(ev)
			}
			fresh, n := q.newDrops()
			if n != c.wantDrops || fresh != (c.wantDrops > 0) {
				t.Errorf("drops %d (fresh %v), want %d", n, fresh, c.wantDrops)
			}
			even := func(pid int) bool { return pid%2 == 0 } // "recorded"
			var execs, exits []int
			for {
				ev, ok := q.sub.TryNext()
				if !ok {
					break
				}
				execs, exits = q.take(ev, execs, exits, even)
			}
			if len(execs) != c.wantExecs || len(exits) != c.wantExt {
				t.Errorf("took %d execs and %d exits, want %d and %d", len(execs), len(exits), c.wantExecs, c.wantExt)
			}
			for i, pid := range execs {
				if pid != i+1 {
					t.Fatalf("exec %d has pid %d: the queue lost its order", i, pid)
				}
			}
			if q.rescan != c.wantRescan {
				t.Errorf("rescan %v, want %v", q.rescan, c.wantRescan)
			}
			if again, _ := q.newDrops(); again {
				t.Error("the same drops reported twice")
			}
		})
	}
}

package daemon

import (
	"testing"

	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/monitor"
	"github.com/lanes-qos/lanes/procwatch"
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
			var execs []execItem
			var exits []enforce.Exit
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
			for i, x := range execs {
				if x.pid != i+1 || x.known {
					t.Fatalf("exec %d is %+v: the queue lost its order, or made up what the exec carried", i, x)
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

// An exec of procwatch keeps what it carried; its exit keeps the start
// time; the proc connector's carry none.
func TestPlacerTakesWhatEventsCarry(t *testing.T) {
	bus := events.New()
	defer bus.Close()
	q, err := newPlacerQueue(bus)
	if err != nil {
		t.Fatal(err)
	}
	bus.Publish(events.Event{Source: procwatch.Source, Topic: monitor.TopicExec, Payload: map[string]any{
		"pid": int64(42), procwatch.KeyStart: uint64(777), procwatch.KeyComm: "make", procwatch.KeyUID: int64(1000),
		procwatch.KeyCgroupV2: uint64(5), procwatch.KeyCgroupCPU: uint64(6), procwatch.KeyCgroupIO: uint64(7)}})
	bus.Publish(events.Event{Source: procwatch.Source, Topic: monitor.TopicExit, Payload: map[string]any{
		"pid": int64(42), "ppid": int64(1), procwatch.KeyStart: uint64(777)}})
	// A procwatch exec missing a field is taken as the proc connector's.
	bus.Publish(events.Event{Source: procwatch.Source, Topic: monitor.TopicExec, Payload: map[string]any{"pid": int64(43)}})
	ev, _ := monitor.Event{Kind: monitor.Exec, PID: 44, TGID: 44}.BusEvent()
	bus.Publish(ev)
	ev, _ = monitor.Event{Kind: monitor.Exit, PID: 44, TGID: 44}.BusEvent()
	bus.Publish(ev)
	var execs []execItem
	var exits []enforce.Exit
	for {
		ev, ok := q.sub.TryNext()
		if !ok {
			break
		}
		execs, exits = q.take(ev, execs, exits, func(int) bool { return true })
	}
	want := procwatch.Exec{PID: 42, Start: 777, Comm: "make", UID: 1000, Cgroups: cgroup.IDs{V2: 5, CPU: 6, IO: 7}}
	if len(execs) != 3 || !execs[0].known || execs[0].x != want || execs[1].known || execs[1].pid != 43 || execs[2].known || execs[2].pid != 44 {
		t.Errorf("execs %+v", execs)
	}
	if len(exits) != 2 || exits[0] != (enforce.Exit{PID: 42, Start: 777}) || exits[1] != (enforce.Exit{PID: 44}) {
		t.Errorf("exits %+v", exits)
	}
}

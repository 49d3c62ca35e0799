package daemon

import (
	"testing"

	"github.com/lanes-qos/lanes/events"
)

// A subscriber that never reads shows in the status response with its
// drops counted, and the publisher was never held up by it.
func TestStatusShowsStuckSubscriber(t *testing.T) {
	d := &Daemon{logf: t.Logf, bus: events.New()}
	defer d.bus.Close()
	if _, err := d.bus.Subscribe(events.Options{Name: "stuck", Topics: []string{"lane.>"}, Queue: 8}); err != nil {
		t.Fatal(err)
	}
	live, err := d.bus.Subscribe(events.Options{Name: "live", Topics: []string{">"}, Queue: 1000, Drop: events.DropOldest})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		d.bus.Publish(events.Event{Source: "test", Topic: "lane.bg.cpu"})
	}
	d.bus.Publish(events.Event{Source: "test", Topic: "bad topic"})
	for range 10 {
		live.TryNext()
	}
	st := d.busStats()
	if st.Published != 100 || st.InvalidTopics != 1 || len(st.Subscriptions) != 2 {
		t.Fatalf("bus stats %+v", st)
	}
	got := map[string][4]uint64{}
	for _, s := range st.Subscriptions {
		got[s.Name] = [4]uint64{uint64(s.Queued), s.Delivered, s.Dropped, uint64(s.Queue)}
	}
	if want := [4]uint64{8, 0, 92, 8}; got["stuck"] != want {
		t.Errorf("stuck: queued, delivered, dropped, queue = %v, want %v", got["stuck"], want)
	}
	if want := [4]uint64{90, 10, 0, 1000}; got["live"] != want {
		t.Errorf("live: queued, delivered, dropped, queue = %v, want %v", got["live"], want)
	}
	if st.Subscriptions[0].Name != "live" || st.Subscriptions[0].Policy != "drop-oldest" {
		t.Errorf("subscriptions not sorted by name or policy missing: %+v", st.Subscriptions)
	}
}

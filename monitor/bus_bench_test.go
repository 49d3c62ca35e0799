package monitor

import (
	"testing"

	"github.com/lanes-qos/lanes/events"
)

// BenchmarkProcEventOnBus is a process event's cost on the bus: its
// conversion (the payload map), Publish to the placer-like subscription
// and TryNext, as the placer takes it.
func BenchmarkProcEventOnBus(b *testing.B) {
	bus := events.New()
	defer bus.Close()
	sub, err := bus.Subscribe(events.Options{Name: "placer", Topics: []string{TopicExec, TopicExit, TopicOverflow}, Queue: 8192})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ev, _ := Event{Kind: Exec, PID: 1000 + i%30000, TGID: 1000 + i%30000}.BusEvent()
		bus.Publish(ev)
		got, ok := sub.TryNext()
		if !ok || PID(got) == 0 {
			b.Fatal("lost")
		}
	}
}

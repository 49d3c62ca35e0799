package bridge

import (
	"testing"
	"time"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
)

// A bridge whose server never answers buffers what it exports, drops the
// oldest beyond its buffer, and counts what is left as lost when it stops:
// every event is accounted for.
func TestUnreachableServer(t *testing.T) {
	bus := events.New()
	defer bus.Close()
	// Port 1 on loopback: nothing listens, the connection is refused.
	cfg := lane.Bridge{URL: "nats://127.0.0.1:1", Host: "h", Export: []string{"app.>"}, Buffer: 5}
	b, err := Start(bus, cfg, Options{ReconnectWait: 50 * time.Millisecond, DrainTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		bus.Publish(events.Event{Source: "app/1", Topic: "app.1.report", Payload: map[string]any{"i": int64(i)}})
	}
	bus.Publish(events.Event{Source: "host/x/app/1", Topic: "app.1.report"}) // imported: never exported
	deadline := time.Now().Add(5 * time.Second)
	for b.Stats().Lost != 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := b.Stats(); st.Connected || st.Buffered != 5 || st.Lost != 3 || st.Sent != 0 {
		t.Errorf("while unreachable: %+v, want 5 buffered, 3 lost", st)
	}
	start := time.Now()
	st := b.Close()
	if st.Buffered != 0 || st.Lost != 8 || st.Sent != 0 || st.Connected {
		t.Errorf("after Close: %+v, want all 8 lost", st)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v with no server to drain to", d)
	}
}

func TestStartRefuses(t *testing.T) {
	bus := events.New()
	defer bus.Close()
	tests := []struct {
		name string
		cfg  lane.Bridge
	}{
		{"no url", lane.Bridge{Host: "h", Buffer: 1}},
		{"no host", lane.Bridge{URL: "nats://127.0.0.1:1", Buffer: 1}},
		{"no buffer", lane.Bridge{URL: "nats://127.0.0.1:1", Host: "h"}},
		{"missing credentials", lane.Bridge{URL: "nats://127.0.0.1:1", Host: "h", Buffer: 1, Credentials: "/nonexistent/lanes.creds"}},
		{"bad in filter", lane.Bridge{URL: "nats://127.0.0.1:1", Host: "h", Buffer: 1, In: "payload."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if b, err := Start(bus, tt.cfg, Options{}); err == nil {
				b.Close()
				t.Errorf("Start(%+v) succeeded", tt.cfg)
			}
		})
	}
}

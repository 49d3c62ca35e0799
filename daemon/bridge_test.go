package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
)

// The daemon starts the bridge when [bridge] url is set, keeps it across a
// reload that leaves [bridge] alone, restarts it when a key changes, and
// stops it when the url goes; doctor and status say so.
func TestApplyBridge(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(s.Shutdown)
	url := s.ClientURL()

	cfgWith := func(file string) *lane.Config {
		t.Helper()
		c, err := lane.Parse("lanes.toml", []byte(file))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	on := cfgWith(fmt.Sprintf("[bridge]\nurl = %q\nhost = \"h1\"\n", url))
	changed := cfgWith(fmt.Sprintf("[bridge]\nurl = %q\nhost = \"h1\"\nbuffer = 10\n", url))
	off := cfgWith("")

	d := &Daemon{logf: t.Logf, bus: events.New(), health: map[string]api.Health{}}
	defer d.bus.Close()
	defer d.stopBridge()
	steps := []struct {
		name     string
		cfg      *lane.Config
		running  bool
		same     bool // the bridge of the step before is kept
		doctor   string
		statusOK bool
	}{
		{"off at start", off, false, false, "no [bridge] url", false},
		{"url set", on, true, false, "connected to", true},
		{"reload, same bridge", on.Clone(), true, true, "connected to", true},
		{"reload, buffer changed", changed, true, false, "connected to", true},
		{"reload, url gone", off, false, false, "no [bridge] url", false},
	}
	var prev any
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			d.mu.Lock()
			d.cfg = st.cfg
			d.mu.Unlock()
			d.applyBridge(st.cfg)
			if (d.bridge != nil) != st.running {
				t.Fatalf("bridge running %v, want %v", d.bridge != nil, st.running)
			}
			if st.running {
				if same := any(d.bridge) == prev; same != st.same {
					t.Errorf("kept the previous bridge: %v, want %v", same, st.same)
				}
				deadline := time.Now().Add(5 * time.Second)
				for !d.bridge.Stats().Connected && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
			}
			if m := d.bridgeMechanism(); !strings.Contains(m.Reason, st.doctor) || !m.OK {
				t.Errorf("doctor line %+v, want OK and %q", m, st.doctor)
			}
			if b := d.bridgeStatus(); (b != nil) != st.statusOK || b != nil && (!b.Connected || b.Host != "h1") {
				t.Errorf("status %+v", b)
			}
			if st.running {
				prev = any(d.bridge)
			} else {
				prev = nil
			}
		})
	}

	// Configured but the server gone: doctor says so.
	d.applyBridge(on)
	d.mu.Lock()
	d.cfg = on
	d.mu.Unlock()
	s.Shutdown()
	deadline := time.Now().Add(5 * time.Second)
	for d.bridge.Stats().Connected && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if m := d.bridgeMechanism(); m.OK || !strings.Contains(m.Reason, "not connected") {
		t.Errorf("doctor line with the server gone: %+v", m)
	}
}

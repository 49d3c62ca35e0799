package daemon

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// eventsDaemon is a daemon with a bus, a state store and (history > 0) a
// history writer, serving its API on a Unix socket until the test ends.
func eventsDaemon(t *testing.T, history int, retention time.Duration) (*Daemon, *client.Client) {
	t.Helper()
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := lane.Default()
	cfg.Events.History, cfg.Events.Retention = history, retention
	d := &Daemon{logf: t.Logf, cfg: cfg, store: st, bus: events.New()}
	if d.ev, err = d.startEvents(cfg); err != nil {
		t.Fatal(err)
	}
	sock := serveAPI(t, d)
	t.Cleanup(func() { d.ev.stop(); d.bus.Close(); st.Close() })
	return d, client.New(sock)
}

func ptr(f float64) *float64 { return &f }

// A report is published on app.<caller's pid>.report with the metrics,
// the targets' bounds and who reported; the caller's directives stream
// gets the directives to its own pid.
func TestReportAndDirectives(t *testing.T) {
	d, c := eventsDaemon(t, 0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := d.bus.Subscribe(events.Options{Name: "test", Topics: []string{"app.>"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	resp, err := c.Report(ctx, api.ReportRequest{Metrics: map[string]float64{"fps": 19.5, "latency_ms": 40},
		Targets: map[string]api.Target{"fps": {Min: ptr(18), Max: ptr(25)}}})
	if err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	if resp.PID != pid || resp.Topic != AppTopic(pid, "report") {
		t.Errorf("response %+v, want pid %d", resp, pid)
	}
	ev, err := sub.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"fps": 19.5, "latency_ms": 40.0, "fps_min": 18.0, "fps_max": 25.0,
		"pid": int64(pid), "uid": int64(os.Getuid()), "lane": laneOfPID(pid)}
	if ev.Topic != AppTopic(pid, "report") || ev.Seq != resp.Seq || len(ev.Payload) != len(want) {
		t.Fatalf("event %v, want %s with %v", ev, AppTopic(pid, "report"), want)
	}
	for k, v := range want {
		if ev.Payload[k] != v {
			t.Errorf("payload %s = %v (%T), want %v (%T)", k, ev.Payload[k], ev.Payload[k], v, v)
		}
	}

	// Directives: the stream carries this process's only.
	s, err := c.Directives(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitSubscribed(t, d.bus, "api/directives/")
	if _, err := PublishDirective(d.bus, "controller/test", 1, map[string]any{"fps_max": 10.0}); err != nil {
		t.Fatal(err)
	}
	if _, err := PublishDirective(d.bus, "controller/test", pid, map[string]any{"fps_max": 20.0}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got.Topic != AppTopic(pid, "directive") || got.Payload["fps_max"] != 20.0 || got.Payload["uid"] != float64(os.Getuid()) {
		t.Errorf("directive %+v, want one to pid %d with fps_max 20", got, pid)
	}
}

// waitSubscribed waits until the bus has a subscription whose name starts
// with prefix (a stream subscribes once its request arrives).
func waitSubscribed(t *testing.T, b *events.Bus, prefix string) *events.Stats {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		for _, s := range b.Stats().Subscriptions {
			if strings.HasPrefix(s.Name, prefix) {
				return &s
			}
		}
	}
	t.Fatalf("no subscription %s* on the bus", prefix)
	return nil
}

var _ = errors.Is
var _ = io.EOF

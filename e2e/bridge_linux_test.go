package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/lanes-qos/lanes/api"
)

// With [bridge] url set, lanesd connects to the NATS server and imports
// other hosts' events; `lanes status` shows the counters and `lanes
// doctor` the connection; a reload without a url stops the bridge.
func TestBridgeThroughLanesd(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(s.Shutdown)
	e := newEnv(t, fmt.Sprintf("[bridge]\nurl = %q\nhost = \"e2e\"\n", s.ClientURL()))
	e.start()

	status := func() *api.Bridge {
		var st api.Status
		e.lanesJSON(&st, "status")
		return st.Bridge
	}
	waitFor(t, 10*time.Second, "lanesd's bridge to connect", func() bool { b := status(); return b != nil && b.Connected })

	// Another host's report arrives and is counted; a bad one is refused.
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Publish("lanes.other.app.77.report", []byte(`{"source":"app/77","payload":{"fps":20}}`))
	nc.Publish("lanes.other.app.77.report", []byte(`{"source":"app/77","payload":{"fps":"x","s":`))
	nc.Flush()
	waitFor(t, 5*time.Second, "the import to be counted", func() bool { b := status(); return b.Received == 1 && b.Refused == 1 })
	if r := e.lanes("status"); !strings.Contains(r.stdout, "bridge:  "+s.ClientURL()+" as host e2e, connected") || !strings.Contains(r.stdout, "1 received, 1 refused") {
		t.Errorf("lanes status lacks the bridge:\n%s", r.stdout)
	}
	if r := e.lanes("doctor"); !strings.Contains(r.stdout, "event bridge") || !strings.Contains(r.stdout, "connected to") {
		t.Errorf("lanes doctor lacks the bridge line:\n%s", r.stdout)
	}

	e.writeConfig("")
	if r := e.lanes("reload"); r.code != 0 {
		t.Fatalf("reload: %d %s", r.code, r.stderr)
	}
	if b := status(); b != nil {
		t.Errorf("bridge still running after a reload without one: %+v", b)
	}
	if r := e.lanes("doctor"); !strings.Contains(r.stdout, "no [bridge] url") {
		t.Errorf("lanes doctor after the reload:\n%s", r.stdout)
	}
	e.stop()
	if !strings.Contains(e.log.String(), "bridge: stopped: 0 sent") {
		t.Errorf("lanesd's log does not say the bridge stopped:\n%s", e.log)
	}
}

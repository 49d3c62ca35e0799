package daemon

import (
	"fmt"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/bridge"
	"github.com/lanes-qos/lanes/lane"
)

// applyBridge makes the running bridge match cfg's [bridge]: started when
// a url is set, stopped when it is not, restarted when a key changed
// (the old one sends what it buffered first, within its drain timeout).
func (d *Daemon) applyBridge(cfg *lane.Config) {
	d.bridgeMu.Lock()
	defer d.bridgeMu.Unlock()
	if d.bridge != nil && d.bridge.Config().Equal(cfg.Bridge) {
		return
	}
	d.stopBridgeLocked()
	if !cfg.Bridge.Enabled() {
		d.setHealth("bridge", "")
		return
	}
	b, err := bridge.Start(d.bus, cfg.Bridge, bridge.Options{Logf: d.logf})
	if err != nil {
		d.setHealth("bridge", err.Error())
		d.logf("%v", err)
		return
	}
	d.setHealth("bridge", "")
	d.bridge = b
}

// stopBridge stops the bridge (reload without one, daemon stop).
func (d *Daemon) stopBridge() {
	d.bridgeMu.Lock()
	defer d.bridgeMu.Unlock()
	d.stopBridgeLocked()
}

func (d *Daemon) stopBridgeLocked() {
	if d.bridge == nil {
		return
	}
	st := d.bridge.Close()
	d.logf("bridge: stopped: %d sent, %d lost, %d expired, %d received, %d refused", st.Sent, st.Lost, st.Expired, st.Received, st.Refused)
	d.bridge = nil
}

// bridgeStatus is the bridge's counters for /v1/status (nil: none).
func (d *Daemon) bridgeStatus() *api.Bridge {
	d.bridgeMu.Lock()
	defer d.bridgeMu.Unlock()
	if d.bridge == nil {
		return nil
	}
	s := d.bridge.Stats()
	return &api.Bridge{URL: s.URL, Host: s.Host, Connected: s.Connected, Server: s.Server, Reconnects: s.Reconnects,
		Sent: s.Sent, Buffered: s.Buffered, Lost: s.Lost, Expired: s.Expired, FilterErrors: s.FilterErrors,
		Received: s.Received, Refused: s.Refused, Filtered: s.Filtered, Dropped: s.Dropped, LastError: s.LastError}
}

// bridgeMechanism is `lanes doctor`'s line about the bridge.
func (d *Daemon) bridgeMechanism() api.Mechanism {
	cfg := d.config().Bridge
	m := api.Mechanism{Resource: "event bridge", Backend: "off", Preferred: true, OK: true,
		Reason: "no [bridge] url: events stay on this host"}
	if !cfg.Enabled() {
		return m
	}
	m.Backend = "nats"
	st := d.bridgeStatus()
	switch {
	case st == nil:
		m.OK, m.Reason = false, fmt.Sprintf("configured (%s) but not running: see lanes status", cfg.URL)
	case st.Connected:
		m.Reason = fmt.Sprintf("connected to %s as host %s", st.Server, st.Host)
	default:
		m.OK = false
		m.Reason = fmt.Sprintf("configured (%s) but not connected, %d events buffered", cfg.URL, st.Buffered)
		if st.LastError != "" {
			m.Reason += ": " + st.LastError
		}
	}
	return m
}

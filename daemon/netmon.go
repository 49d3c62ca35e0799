package daemon

import (
	"context"

	"github.com/lanes-qos/lanes/monitor"
)

// watchNetwork starts the rtnetlink monitor on the network namespace at
// netnsPath ("" for lanesd's own), publishing link, address, default
// route and connectivity changes on the bus (net.link.<ifname>,
// net.addr.<ifname>, net.route.default, net.connectivity). It returns
// the function that stops it (never nil). When the monitor cannot start,
// the health check "net-monitor" says why and lanesd runs without it.
func (d *Daemon) watchNetwork(ctx context.Context, netnsPath string) (stop func()) {
	m, err := monitor.WatchNet(ctx, monitor.NetOptions{Netns: netnsPath, Logf: d.logf, OnChange: d.publishNetChange})
	if err != nil {
		d.logf("network monitor: %v (no net.* events)", err)
		d.setHealth("net-monitor", "network monitor unavailable, no net.* events: "+err.Error())
		return func() {}
	}
	d.setHealth("net-monitor", "")
	return func() { m.Close() }
}

// publishNetChange puts a change on the bus; connectivity changes are
// logged too.
func (d *Daemon) publishNetChange(c monitor.NetChange) {
	if c.Kind == monitor.ConnectivityChanged {
		d.logf("network: %v", c)
		d.connUp.Store(c.Up)
	}
	if ev, ok := c.Event(); ok {
		d.bus.Publish(ev)
	}
}

package daemon

import (
	"strings"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/monitor"
)

// IdleSource is the Source of the idletime controllers' events.
const IdleSource = "idletime"

// idleObserver publishes an idletime controller's holds and releases on
// the bus: idletime.net.<ifname>.<hold|release> (payload direction) for
// the network's gates, idletime.disk.<dev>.<hold|release> for the disks';
// payload lanes (the lanes whose background is held), pi_us, reason
// (idletime.Reason*), gate (the gate's name).
func (d *Daemon) idleObserver(kind string, lanes []string) func(idletime.Transition) {
	held := make([]any, len(lanes))
	for i, l := range lanes {
		held[i] = l
	}
	return func(tr idletime.Transition) {
		res, dir := idleResource(kind, tr.Name)
		what := "release"
		if tr.Held {
			what = "hold"
		}
		p := map[string]any{
			"lanes": held, "pi_us": tr.PI.Microseconds(), "reason": tr.Reason, "gate": tr.Name,
		}
		if dir != "" {
			p["direction"] = dir
		}
		d.bus.Publish(events.Event{Source: IdleSource, Topic: "idletime." + res + "." + what, Payload: p})
	}
}

// idleResource is the topic tokens of a gate's resource, "net.<ifname>"
// or "disk.<dev>", and the direction of a network gate. Network gates are
// named "IFNAME/DIRECTION" (netsched), disk gates "disk NAME (MAJ:MIN)"
// or "disk MAJ:MIN" (diskidle).
func idleResource(kind, gate string) (res, dir string) {
	switch kind {
	case "net":
		ifname := gate
		if i := strings.LastIndexByte(gate, '/'); i >= 0 {
			ifname, dir = gate[:i], gate[i+1:]
		}
		return "net." + monitor.TopicToken(ifname), dir
	case "disk":
		dev := strings.TrimPrefix(gate, "disk ")
		if i := strings.Index(dev, " ("); i >= 0 {
			dev = dev[:i]
		}
		// A device number ("7:0") is a token as it is.
		if events.ValidateTopic(dev) == nil && !strings.Contains(dev, ".") {
			return "disk." + dev, ""
		}
		return "disk." + monitor.TopicToken(dev), ""
	}
	return kind + "." + monitor.TopicToken(gate), ""
}

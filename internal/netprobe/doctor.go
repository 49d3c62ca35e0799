package netprobe

import "github.com/lanes-qos/lanes/internal/features"

// Doctor returns the network lines of `lanes doctor` when no daemon runs:
// the mechanisms lanes would use (Probe) and the interface of the default
// route, which lanes shapes unless configured otherwise. It changes
// nothing on the host.
func Doctor() ([]features.Mechanism, error) {
	ms := Probe().Mechanisms()
	if l, err := DefaultRouteLink(); err == nil {
		reason := "not shaped: while lanes shapes a device it bounds its GSO and GRO packets to about a millisecond at the shaped rate"
		if l.Err != "" {
			reason += " (could not read: " + l.Err + ")"
		}
		ms = append(ms, features.Mechanism{Resource: "net link " + l.Iface + " (default route; not shaped: no daemon runs)",
			Backend: l.Backend(""), Preferred: true, Reason: reason, OK: true})
	}
	return ms, nil
}

package intproxy

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/lanes-qos/lanes/intnw"
	"github.com/lanes-qos/lanes/lane"
)

// ParsePath reads a client end's path: comma-separated key=value pairs,
// "to=ADDRESS:PORT" (the server end through this network) and optionally
// "name=NAME", "from=ADDRESS" (the local address, whose source routing
// picks the network), "dev=DEVICE" (bind to an interface) and
// "rate=RATE" (the path's bandwidth until it is measured, e.g. "3mbit").
// Example: name=wifi,from=198.18.10.1,to=198.18.20.1:7000.
func ParsePath(s string) (intnw.Path, error) {
	var p intnw.Path
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return p, fmt.Errorf("path %q: %q is not KEY=VALUE (keys: name, from, to, dev, rate)", s, kv)
		}
		if seen[k] {
			return p, fmt.Errorf("path %q: %s given twice", s, k)
		}
		seen[k] = true
		var err error
		switch k {
		case "name":
			p.Name = v
		case "from":
			p.Local, err = netip.ParseAddr(v)
		case "to":
			p.Remote, err = netip.ParseAddrPort(v)
			if err == nil && p.Remote.Port() == 0 {
				err = fmt.Errorf("port 0")
			}
		case "dev":
			p.Device = v
		case "rate":
			var r uint64
			r, err = lane.ParseRate(v)
			p.Bandwidth = float64(r)
		default:
			return p, fmt.Errorf("path %q: unknown key %q (keys: name, from, to, dev, rate)", s, k)
		}
		if err != nil {
			return p, fmt.Errorf("path %q: %s=%s: %v", s, k, v, err)
		}
	}
	if !p.Remote.IsValid() {
		return p, fmt.Errorf("path %q: no to=ADDRESS:PORT (the server end through this network)", s)
	}
	return p, nil
}

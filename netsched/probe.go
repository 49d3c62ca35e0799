package netsched

import (
	"fmt"

	"github.com/lanes-qos/lanes/internal/features"
)

// Probe reports the network mechanisms lanes would use on this host, for
// `lanes doctor` without a daemon: it probes (in throwaway namespaces) and
// loads the programs, changes no interface, and releases everything.
func Probe() ([]features.Mechanism, error) {
	e, err := New(func(string, ...any) {})
	if err != nil {
		return []features.Mechanism{{Resource: "net scheduling", Backend: "none", Reason: err.Error()}}, nil
	}
	defer e.Close()
	ms := e.Mechanisms()
	if len(ms) == 0 {
		return nil, fmt.Errorf("probe network: no mechanisms reported")
	}
	if f, err := DefaultRouteFacts(); err == nil {
		m := f.Mechanism()
		m.Resource += " (default route; not shaped: no daemon runs)"
		ms = append(ms, m)
	}
	return ms, nil
}

package enforce

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/systemd"
)

// usePlacement decides how lane groups are made: where systemd owns the
// cgroup tree (internal/systemd.Probe) as systemd units, created through
// it (h.Units is set), else as cgroupfs directories. The mechanism says
// which and why, for doctor.
func usePlacement(h *cgroup.Hierarchy, logf func(string, ...any)) features.Mechanism {
	m := features.Mechanism{Resource: "placement", OK: true}
	err := systemd.Probe(h)
	if err != nil {
		m.Backend = "cgroupfs: lanes-<lane> groups at the top of each hierarchy"
		m.Reason = err.Error()
		m.Preferred = true // nobody else owns the tree
		return m
	}
	mgr, err := systemd.Connect(context.Background())
	if err != nil {
		m.Backend = "cgroupfs: lanes-<lane> groups at the top of each hierarchy"
		m.Reason = "systemd owns the cgroup tree but does not answer (" + err.Error() + "): its units' processes can leave them"
		logf("placement: %s", m.Reason)
		return m
	}
	h.Units = mgr
	m.Backend = "systemd: a slice per lane (" + cgroup.SlicePrefix + "<lane>.slice) with its processes in a scope, over " + mgr.Via
	m.Reason = "PID 1 is systemd and the hierarchy is cgroup v2: systemd owns the tree"
	m.Preferred = true
	return m
}

// ServiceOf returns the systemd service a process in m belongs to, where
// systemd owns the tree and moving the process into a lane's scope would
// take it out of that service (systemctl stop would no longer reach it,
// the unit's limits and accounting would no longer apply); "" otherwise.
// Scopes (sessions, systemd-run --scope, lanes' own) are not services:
// their processes may move.
func (e *Engine) ServiceOf(m cgroup.Membership) string {
	if e.H.Units == nil || m.V2 == "" || cgroup.GroupOfPath(m.V2) != "" {
		return ""
	}
	// The innermost unit: a service may have groups of its own below it
	// (Delegate=yes).
	for p := m.V2; p != "/" && p != "." && p != ""; p = path.Dir(p) {
		base := path.Base(p)
		switch {
		case strings.HasSuffix(base, ".service"):
			return base
		case strings.HasSuffix(base, ".scope"), strings.HasSuffix(base, ".slice"):
			return ""
		}
	}
	return ""
}

// SplitOf returns why a process in m may not move into laneName where
// systemd owns the cgroup tree, nil when it may: it is in a unit whose
// cgroups systemd delegated to a manager of their own (a user's systemd
// --user, a container's scope: cgroup.Hierarchy.DelegatedUnit), or it
// belongs to a service (ServiceOf).
func (e *Engine) SplitOf(pid int, m cgroup.Membership, laneName string) *SplitError {
	if e.H.Units == nil || m.V2 == "" || cgroup.GroupOfPath(m.V2) != "" {
		return nil
	}
	if u := e.H.DelegatedUnit(m.V2); u != "" {
		return &SplitError{PID: pid, Service: u, Lane: laneName, Delegated: true}
	}
	if svc := e.ServiceOf(m); svc != "" {
		return &SplitError{PID: pid, Service: svc, Lane: laneName}
	}
	return nil
}

// SplitError refuses to move a process out of its systemd service, or out
// of a unit whose cgroups another manager owns (Delegated).
type SplitError struct {
	PID       int
	Service   string
	Lane      string
	Delegated bool
}

func (e *SplitError) Error() string {
	if e.Delegated {
		return fmt.Sprintf("process %d is in %s, whose cgroups systemd delegated to a manager of their own (Delegate=yes: a user's systemd --user, a container runtime): "+
			"moving it into lane %s would take it from that manager; not moved: start the command in the lane with lanes run -l %s -- COMMAND",
			e.PID, e.Service, e.Lane, e.Lane)
	}
	return fmt.Sprintf("process %d belongs to %s: moving it into lane %s would take it out of the service (systemctl stop would no longer reach it); "+
		"not moved: run the service in the lane with Slice=%s in its unit, or set the lane's CPU and I/O weights on it with systemctl set-property",
		e.PID, e.Service, e.Lane, cgroup.SliceUnit(cgroup.Prefix+e.Lane))
}

// UnitMove is a systemd scope that a move takes whole: the requested
// process and every other process of its scope.
type UnitMove struct {
	Unit  string `json:"unit"`
	PID   int    `json:"pid"`   // the requested process in it
	Procs int    `json:"procs"` // how many processes the scope held
}

// WithUnits adds to pids, where systemd owns the cgroup tree, the other
// processes of each one's scope, so that the scope moves whole (and
// systemd, finding it empty, lets it go) rather than being split between
// a lane and its old place. A login session's scope (session-N.scope)
// stays as it is: the requested processes move with their descendants
// only, or the user's shell and everything else of the session would
// move too; so does a scope of a user's manager (user@UID.service). Lanes' own scopes and init.scope are never expanded, and
// services are the caller's check (ServiceOf).
func (e *Engine) WithUnits(pids []int) ([]int, []UnitMove) {
	if e.H.Units == nil {
		return pids, nil
	}
	seen := map[int]bool{}
	for _, p := range pids {
		seen[p] = true
	}
	out := append([]int(nil), pids...)
	var units []UnitMove
	done := map[string]bool{}
	for _, pid := range pids {
		m, err := cgroup.ProcMembership(pid)
		if err != nil || done[m.V2] {
			continue
		}
		unit, peers := e.scopePeers(m)
		if unit == "" {
			continue
		}
		done[m.V2] = true
		for _, p := range peers {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
		units = append(units, UnitMove{Unit: unit, PID: pid, Procs: len(peers)})
	}
	return out, units
}

// scopePeers returns the scope a process in m is in and the processes it
// holds, where that scope moves whole (see WithUnits); "" otherwise.
func (e *Engine) scopePeers(m cgroup.Membership) (string, []int) {
	if e.H.Units == nil || m.V2 == "" || cgroup.GroupOfPath(m.V2) != "" {
		return "", nil
	}
	unit := path.Base(m.V2)
	// A scope in a delegated subtree (a user's manager below
	// user@UID.service, a container runtime's) is that manager's: lanes,
	// asking the system manager, could not start it again on stop.
	if !strings.HasSuffix(unit, ".scope") || strings.HasPrefix(unit, "session-") || unit == "init.scope" || e.H.DelegatedUnit(m.V2) != "" {
		return "", nil
	}
	peers, err := cgroup.ReadProcs(e.H, m.V2)
	if err != nil {
		return "", nil
	}
	return unit, peers
}

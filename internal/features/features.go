package features

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// ErrNotSupported is wrapped by every conclusive "missing" answer.
var ErrNotSupported = errors.ErrUnsupported

// MissingError says which feature is missing and what would provide it.
type MissingError struct {
	Feature  string // e.g. "qdisc fq_codel"
	Requires string // e.g. "CONFIG_NET_SCH_FQ_CODEL" or ">= Linux 5.15"
	Err      error  // the underlying error, if any
}

func (e *MissingError) Error() string {
	msg := e.Feature + " not supported"
	if e.Requires != "" {
		msg += " (requires " + e.Requires + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrNotSupported) true.
func (e *MissingError) Is(target error) bool { return target == ErrNotSupported }

// Unwrap returns the underlying error.
func (e *MissingError) Unwrap() error { return e.Err }

// Missing returns a conclusive "not supported" error.
func Missing(feature, requires string, err error) error {
	return &MissingError{Feature: feature, Requires: requires, Err: err}
}

// Mechanism is one line of `lanes doctor`: a resource mechanism, the
// backend lanes uses for it on this host, and why.
type Mechanism struct {
	Resource  string `json:"resource"`  // "cpu", "disk", "process grouping", "net egress", ...
	Backend   string `json:"backend"`   // e.g. "cgroup v1 cpu.shares + cpu.idle"
	Preferred bool   `json:"preferred"` // true when the preferred form is in use
	Reason    string `json:"reason"`    // why this backend (what was probed, what is missing)
	OK        bool   `json:"ok"`        // false when no backend at all works
}

// Probe memoises a probe function, caching only conclusive results (nil,
// or an error wrapping ErrNotSupported).
type Probe struct {
	Name string
	Fn   func() error

	mu     sync.Mutex
	done   bool
	result error
}

// Result runs the probe (once, if its answer is conclusive) and returns it.
func (p *Probe) Result() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.result
	}
	err := p.Fn()
	if err == nil || errors.Is(err, ErrNotSupported) {
		p.done, p.result = true, err
		return err
	}
	return fmt.Errorf("probe %s: %w", p.Name, err)
}

// ProbeSet memoises probes by name (a qdisc kind, a helper): each name's
// probe runs once its answer is conclusive. The zero value is ready.
type ProbeSet struct {
	mu sync.Mutex
	m  map[string]*Probe
}

// Get returns the probe for name, creating it with fn the first time.
func (s *ProbeSet) Get(name string, fn func() error) *Probe {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*Probe{}
	}
	p, ok := s.m[name]
	if !ok {
		p = &Probe{Name: name, Fn: fn}
		s.m[name] = p
	}
	return p
}

// KernelRelease is the running kernel's release (uname -r), or "unknown":
// the first line of `lanes doctor`. Only the doctor reads it; mechanisms
// are chosen by probing, never by version.
func KernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

//go:build !linux

package procwatch

import (
	"fmt"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/features"
)

// Probe reports that the BPF process events need Linux.
func Probe() error {
	return features.Missing("process events (BPF)", "Linux (tracepoints, BPF ring buffer)", nil)
}

// Ticks converts a start time in ns since boot into clock ticks.
func Ticks(ns uint64) uint64 { return ns / 10_000_000 }

// Watch is the running source; it cannot run outside Linux.
type Watch struct{}

// Publish is not supported outside Linux.
func Publish(bus *events.Bus, logf func(string, ...any)) (*Watch, error) {
	return nil, fmt.Errorf("process events (BPF): %w", Probe())
}

// ExeID knows nothing outside Linux.
func (w *Watch) ExeID(pid int, start uint64) (ExeID, bool) { return ExeID{}, false }

// SetForks is not supported outside Linux.
func (w *Watch) SetForks(on bool) error { return Probe() }

// Stats are the records read since the start, by kind.
type Stats struct {
	Execs, Exits, Forks, Overflows uint64
}

// Stats returns nothing outside Linux.
func (w *Watch) Stats() Stats { return Stats{} }

// Close does nothing outside Linux.
func (w *Watch) Close() error { return nil }

// Mechanism is the `lanes doctor` line: unavailable outside Linux.
func (w *Watch) Mechanism() features.Mechanism {
	return features.Mechanism{Resource: "process events", Backend: "none", Reason: "needs Linux"}
}

// MaxSettle is how many processes one check takes.
const MaxSettle = 64

// ProbeSettle reports that the placement check needs Linux.
func ProbeSettle() error {
	return features.Missing("placement check (BPF)", "Linux (BPF syscall programs)", nil)
}

// Settler cannot run outside Linux.
type Settler struct{}

// NewSettler is not supported outside Linux.
func NewSettler() (*Settler, error) {
	return nil, fmt.Errorf("placement check (BPF): %w", ProbeSettle())
}

// Proc is a process to check.
type Proc struct {
	PID   int
	Start uint64
}

// Settled is what a process still has outside its new groups.
type Settled struct {
	Gone         bool
	Threads      int
	Children     []int
	MoreChildren bool
	Sockets      bool
}

// Settle is not supported outside Linux.
func (s *Settler) Settle(procs []Proc) ([]Settled, error) { return nil, ProbeSettle() }

// Close does nothing outside Linux.
func (s *Settler) Close() error { return nil }

// MaxCount is how many groups one process count takes.
const MaxCount = 64

// ProbeCount reports that the process count needs Linux.
func ProbeCount() error {
	return features.Missing("process count (BPF)", "Linux (BPF syscall programs)", nil)
}

// Counter cannot run outside Linux.
type Counter struct{}

// NewCounter is not supported outside Linux.
func NewCounter() (*Counter, error) {
	return nil, fmt.Errorf("process count (BPF): %w", ProbeCount())
}

// Count is not supported outside Linux.
func (c *Counter) Count(ids []uint64) ([]int, error) { return nil, ProbeCount() }

// Close does nothing outside Linux.
func (c *Counter) Close() error { return nil }

//go:build !linux

package netsched

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/features"
)

var errUnsupported = fmt.Errorf("network enforcement needs Linux: %w", errors.ErrUnsupported)

// Enforcer applies network plans (Linux only).
type Enforcer struct{}

// New returns an error: network enforcement needs Linux.
func New(logf func(string, ...any), opts ...Option) (*Enforcer, error) { return nil, errUnsupported }

// Leaf returns the leaf qdisc kind.
func (e *Enforcer) Leaf() LeafKind { return LeafHeadDrop }

// Apply is unsupported.
func (e *Enforcer) Apply(ctx context.Context, p Plan) error { return errUnsupported }

// BindLane is unsupported.
func (e *Enforcer) BindLane(laneName, cgroupV2Dir string) error { return errUnsupported }

// UnbindLane is unsupported.
func (e *Enforcer) UnbindLane(laneName string) error { return errUnsupported }

// MoveSockets is unsupported.
func (e *Enforcer) MoveSockets(pid int, laneName string) error { return errUnsupported }

// Stats is unsupported.
func (e *Enforcer) Stats(iface string) ([]LaneStats, error) { return nil, errUnsupported }

// Remove is unsupported.
func (e *Enforcer) Remove(iface string) error { return errUnsupported }

// Mechanisms reports that no network mechanism is available.
func (e *Enforcer) Mechanisms() []features.Mechanism {
	return []features.Mechanism{{Resource: "net", Backend: "none", Reason: "needs Linux"}}
}

// Applied returns no plans.
func (e *Enforcer) Applied() map[string]Plan { return nil }

// Close does nothing.
func (e *Enforcer) Close() error { return nil }

// Cleanup is unsupported.
func Cleanup(logf func(string, ...any), opts ...Option) error { return errUnsupported }

// DefaultRouteInterface is unsupported.
func DefaultRouteInterface() (string, error) { return "", errUnsupported }

// IdleGates is unsupported.
func (e *Enforcer) IdleGates(iface string) ([]idletime.Gate, error) { return nil, errUnsupported }

// AllIdleGates returns no gates.
func (e *Enforcer) AllIdleGates() []idletime.Gate { return nil }

// IdleEvents is unsupported.
func (e *Enforcer) IdleEvents(ctx context.Context, gates ...idletime.Gate) (<-chan idletime.Event, error) {
	return nil, errUnsupported
}

// RxWindowStats reports none off Linux.
func (e *Enforcer) RxWindowStats() (RxWindowStats, bool) { return RxWindowStats{}, false }

// RxWindowStats are the receive-window counters (Linux only).
type RxWindowStats struct{ Sockets, Lowered uint64 }

// ForegroundRTT returns 0.
func (e *Enforcer) ForegroundRTT(iface string, smoothed bool) time.Duration { return 0 }

// IdletimeErr is always errUnsupported off Linux.
func (e *Enforcer) IdletimeErr() error { return errUnsupported }

// Links returns nothing off Linux.
func (e *Enforcer) Links() []LinkFacts { return nil }

// OriginalSizes reports none off Linux.
func (e *Enforcer) OriginalSizes(iface string) (SegmentSizes, bool) { return SegmentSizes{}, false }

// RestoreSizes is unsupported.
func RestoreSizes(logf func(string, ...any), iface string, orig SegmentSizes, opts ...Option) error {
	return errUnsupported
}

// OriginalTree reports none off Linux.
func (e *Enforcer) OriginalTree(iface string) (*TreeSnapshot, bool) { return nil, false }

// RestoreTree is unsupported.
func RestoreTree(logf func(string, ...any), iface string, snap *TreeSnapshot, opts ...Option) error {
	return errUnsupported
}

// LaneRTTs reports none off Linux.
func (e *Enforcer) LaneRTTs() (map[string]LaneRTT, bool) { return nil, false }

// ApplySockets is unsupported.
func (e *Enforcer) ApplySockets(sp SocketPlan) error { return errUnsupported }

// DeliveryMeter reads what TCP connections delivered (Linux only).
type DeliveryMeter struct{}

// NewDeliveryMeter is unsupported.
func (e *Enforcer) NewDeliveryMeter(iface string) (*DeliveryMeter, error) { return nil, errUnsupported }

// Read is unsupported.
func (m *DeliveryMeter) Read() (Delivery, error) { return Delivery{}, errUnsupported }

// Close does nothing.
func (m *DeliveryMeter) Close() error { return nil }

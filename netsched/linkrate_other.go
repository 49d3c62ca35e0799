//go:build !linux

package netsched

import (
	"net/netip"
	"time"
)

// SetLinkRate changes a direction's link rate at run time (Linux only).
func (e *Enforcer) SetLinkRate(download bool, rate uint64) error { return errUnsupported }

// LinkRate returns a direction's link rate now (Linux only).
func (e *Enforcer) LinkRate(download bool) uint64 { return 0 }

// SetBottleneckQueue tells the idletime gates of the queue at a
// bottleneck beyond lanes (Linux only).
func (e *Enforcer) SetBottleneckQueue(download bool, queue time.Duration) error {
	return errUnsupported
}

// RestoreLinkRates puts the plans' link rates back (Linux only).
func (e *Enforcer) RestoreLinkRates() error { return errUnsupported }

// Pinger pings a reflector (Linux only).
type Pinger struct{}

// StartPinger is unsupported outside Linux.
func StartPinger(target netip.Addr, interval time.Duration, label uint32, want PingMode, out func(PingSample)) (*Pinger, error) {
	return nil, errUnsupported
}

// ID is unsupported outside Linux.
func (p *Pinger) ID() uint16 { return 0 }

// SetProbeClass is unsupported outside Linux.
func (e *Enforcer) SetProbeClass(id uint16, class uint32) error { return errUnsupported }

// Mode is unsupported outside Linux.
func (p *Pinger) Mode() PingMode { return PingEcho }

// Counts is unsupported outside Linux.
func (p *Pinger) Counts() (answered, lost uint64) { return 0, 0 }

// Close is unsupported outside Linux.
func (p *Pinger) Close() error { return errUnsupported }

//go:build !linux

package monitor

import (
	"context"
	"errors"
	"fmt"
)

// NetMonitor watches links, addresses and routes; Linux only.
type NetMonitor struct{}

// WatchNet fails: rtnetlink is Linux-only.
func WatchNet(ctx context.Context, o NetOptions) (*NetMonitor, error) {
	return nil, fmt.Errorf("watch network: rtnetlink is Linux-only: %w", errors.ErrUnsupported)
}

// Close does nothing.
func (m *NetMonitor) Close() error { return nil }

// Resyncs is 0.
func (m *NetMonitor) Resyncs() uint64 { return 0 }

// Connectivity reports no connectivity.
func (m *NetMonitor) Connectivity() (up bool, ifname string) { return false, "" }

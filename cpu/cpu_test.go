package cpu

import (
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/lane"
)

func TestShares(t *testing.T) {
	tests := []struct{ weight, shares int }{
		{0, 1024}, {1, 10}, {100, 1024}, {1000, 10240}, {10000, 102400}, {50, 512}, {-3, 1024},
	}
	for _, tt := range tests {
		if got := Shares(tt.weight); got != tt.shares {
			t.Errorf("Shares(%d) = %d, want %d", tt.weight, got, tt.shares)
		}
	}
}

func TestQuota(t *testing.T) {
	tests := []struct {
		cap  float64
		ncpu int
		want time.Duration
	}{
		{0, 2, 0},
		{-1, 2, 0},
		{20, 2, 40 * time.Millisecond},
		{20, 1, 20 * time.Millisecond},
		{50, 8, 400 * time.Millisecond},
		{100, 2, 200 * time.Millisecond},
		{150, 2, 200 * time.Millisecond},
		{0.001, 1, time.Millisecond},
		{12.5, 3, 37500 * time.Microsecond},
	}
	for _, tt := range tests {
		if got := Quota(tt.cap, tt.ncpu, Period); got != tt.want {
			t.Errorf("Quota(%v, %d) = %v, want %v", tt.cap, tt.ncpu, got, tt.want)
		}
	}
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name      string
		b         backend
		s         lane.CPU
		groupIdle bool
		want      string
	}{
		{"v2 default", backendV2, lane.CPU{}, true,
			"cpu.idle=0 cpu.weight=100 cpu.max=max 100000"},
		{"v2 interactive", backendV2, lane.CPU{Weight: 1000}, true,
			"cpu.idle=0 cpu.weight=1000 cpu.max=max 100000"},
		{"v2 background", backendV2, lane.CPU{Weight: 10, Idle: true}, true,
			"cpu.idle=1 cpu.max=max 100000"},
		{"v2 background without cpu.idle", backendV2, lane.CPU{Idle: true}, false,
			"cpu.weight=1 cpu.max=max 100000"},
		{"v2 cap", backendV2, lane.CPU{Weight: 200, CapPercent: 20}, true,
			"cpu.idle=0 cpu.weight=200 cpu.max=40000 100000"},
		{"v2 weight clamped", backendV2, lane.CPU{Weight: 20000}, true,
			"cpu.idle=0 cpu.weight=10000 cpu.max=max 100000"},
		{"v1 default", backendV1, lane.CPU{}, true,
			"cpu.idle=0 cpu.shares=1024 cpu.cfs_period_us=100000 cpu.cfs_quota_us=-1"},
		{"v1 interactive", backendV1, lane.CPU{Weight: 1000}, true,
			"cpu.idle=0 cpu.shares=10240 cpu.cfs_period_us=100000 cpu.cfs_quota_us=-1"},
		{"v1 background", backendV1, lane.CPU{Idle: true}, true,
			"cpu.idle=1 cpu.cfs_period_us=100000 cpu.cfs_quota_us=-1"},
		{"v1 background without cpu.idle", backendV1, lane.CPU{Idle: true}, false,
			"cpu.shares=2 cpu.cfs_period_us=100000 cpu.cfs_quota_us=-1"},
		{"v1 cap", backendV1, lane.CPU{CapPercent: 20}, true,
			"cpu.idle=0 cpu.shares=1024 cpu.cfs_period_us=100000 cpu.cfs_quota_us=40000"},
		{"v2 cap with a short period", backendV2, lane.CPU{CapPercent: 10, CapPeriod: 10 * time.Millisecond}, true,
			"cpu.idle=0 cpu.weight=100 cpu.max=2000 10000"},
		// A reserved lane is idle beyond its reservation.
		{"v2 reserved", backendV2, lane.CPU{Weight: 400, ReservePercent: 20}, true,
			"cpu.idle=1 cpu.max=max 100000"},
		{"v1 reserved with cap", backendV1, lane.CPU{ReservePercent: 20, CapPercent: 50}, true,
			"cpu.idle=1 cpu.cfs_period_us=100000 cpu.cfs_quota_us=100000"},
		{"v1 reserved without cpu.idle", backendV1, lane.CPU{ReservePercent: 20}, false,
			"cpu.shares=2 cpu.cfs_period_us=100000 cpu.cfs_quota_us=-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range plan(tt.b, tt.s, 2, tt.groupIdle) {
				got = append(got, s.String())
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("plan = %q\nwant   %q", strings.Join(got, " "), tt.want)
			}
		})
	}
}

// TestPlanGuarantee: the CFS fallback of a reservation in force, the
// highest weight and the reservation's quota in every 10 ms.
func TestPlanGuarantee(t *testing.T) {
	tests := []struct {
		name      string
		b         backend
		s         lane.CPU
		groupIdle bool
		want      string
	}{
		{"v2 fifth", backendV2, lane.CPU{ReservePercent: 20}, true,
			"cpu.idle=0 cpu.weight=10000 cpu.max=2000 10000"},
		{"v2 without cpu.idle", backendV2, lane.CPU{ReservePercent: 150}, false,
			"cpu.weight=10000 cpu.max=15000 10000"},
		{"v2 cap below the reservation", backendV2, lane.CPU{ReservePercent: 50, CapPercent: 10}, true,
			"cpu.idle=0 cpu.weight=10000 cpu.max=2000 10000"},
		{"v2 least quota", backendV2, lane.CPU{ReservePercent: 5}, true,
			"cpu.idle=0 cpu.weight=10000 cpu.max=1000 10000"},
		{"v1 fifth", backendV1, lane.CPU{ReservePercent: 20}, true,
			"cpu.idle=0 cpu.shares=102400 cpu.cfs_period_us=10000 cpu.cfs_quota_us=2000"},
		{"v2 its own period", backendV2, lane.CPU{ReservePercent: 15, ReservePeriod: 40 * time.Millisecond}, true,
			"cpu.idle=0 cpu.weight=10000 cpu.max=6000 40000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range planGuarantee(tt.b, tt.s, 2, tt.groupIdle) {
				got = append(got, s.String())
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("planGuarantee = %q\nwant   %q", strings.Join(got, " "), tt.want)
			}
		})
	}
}

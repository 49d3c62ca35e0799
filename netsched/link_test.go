package netsched

import (
	"strings"
	"testing"
	"time"
)

func TestLinkFactsWarnings(t *testing.T) {
	big := SegmentSizes{GSO: 65536, GSOIPv4: 65536, GRO: 65536, GROIPv4: 65536}
	small := big.bounded(segmentCap(19e6), true)
	tests := []struct {
		name    string
		f       LinkFacts
		rate    uint64
		ingress bool
		want    []string // substrings, one per warning
	}{
		{"not shaped: nothing to warn about", LinkFacts{TSO: true, GSO: true, GRO: true, Sizes: big}, 0, true, nil},
		{"bounded at 19 Mbit/s", LinkFacts{TSO: true, GSO: true, GRO: true, Sizes: small}, 19e6, true, nil},
		{"64 KiB GSO at 19 Mbit/s", LinkFacts{TSO: true, GSO: true, Sizes: big}, 19e6, false, []string{"uploads: GSO packets of up to 65536 bytes hold the link for 27.6ms"}},
		{"offloads off: MTU packets", LinkFacts{Sizes: big}, 19e6, true, nil},
		{"64 KiB GSO at 1 Gbit/s takes 0.5 ms", LinkFacts{TSO: true, GSO: true, Sizes: big}, 1e9, false, nil},
		{"GRO counts only with ingress", LinkFacts{GRO: true, Sizes: big}, 19e6, false, nil},
		{"GRO with ingress", LinkFacts{GRO: true, Sizes: big}, 19e6, true, []string{"downloads: GRO aggregates of up to 65536 bytes"}},
		{"LRO with ingress", LinkFacts{LRO: true, Sizes: small}, 19e6, true, []string{"LRO is on"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.f.warnings(1500, tt.rate, tt.ingress)
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want %d containing %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got[i], w)
				}
			}
			m := LinkFacts{Iface: "eth0", Sizes: tt.f.Sizes, Warnings: got, Rate: tt.rate}.Mechanism()
			if m.Preferred != (len(got) == 0) || !m.OK || m.Resource != "net link eth0" {
				t.Errorf("Mechanism %+v for warnings %q", m, got)
			}
		})
	}
}

// gateSpacing spans two of the largest packets lanes lets TCP build at
// the plan's rate, sent at the direction's current rate, up to 100 ms.
func TestGateSpacing(t *testing.T) {
	tests := []struct {
		name       string
		rate, plan uint64
		want       time.Duration
	}{
		{"nothing shaped", 0, 27_000_000, 0},
		{"at the plan's rate: two 1 ms segments", 27_000_000, 27_000_000, 2 * time.Millisecond},
		{"the plan's segments at 2 Mbit/s", 2_000_000, 27_000_000, 27 * time.Millisecond},
		{"a slow plan: two full packets each", 2_000_000, 2_000_000, 2 * 2 * MTU * 8 * time.Second / 2_000_000},
		{"bounded at 100 ms", 250_000, 27_000_000, 100 * time.Millisecond},
		{"64 KiB segments at 1 Gbit/s", 1_000_000_000, 100_000_000_000, 2 * 65536 * 8 * time.Second / 1_000_000_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gateSpacing(tt.rate, segmentCap(tt.plan)); got != tt.want {
				t.Errorf("gateSpacing(%d, segmentCap(%d)) = %v, want %v", tt.rate, tt.plan, got, tt.want)
			}
		})
	}
}

package linkem

import (
	"fmt"
	"sort"
	"time"
)

// DirStats counts what happened to one direction's packets. All counters
// are cumulative since Start.
type DirStats struct {
	Dir            string  `json:"dir"` // "up" (src→dst) or "down"
	PacketsIn      uint64  `json:"packets_in"`
	BytesIn        uint64  `json:"bytes_in"`
	Lost           uint64  `json:"lost"`    // random or burst loss
	Dropped        uint64  `json:"dropped"` // drop-tail
	Delivered      uint64  `json:"delivered"`
	BytesDelivered uint64  `json:"bytes_delivered"`
	MaxQueue       int     `json:"max_queue_packets"`
	SettingRate    float64 `json:"setting_rate_bps"` // Rate, or the trace's mean rate
	// FirstDelivery and LastDelivery bound the deliveries, from Start.
	FirstDelivery time.Duration `json:"first_delivery_ns"`
	LastDelivery  time.Duration `json:"last_delivery_ns"`
	// Lateness is how late packets were written compared with the model's
	// delivery time (the delay error), over the last lateness window.
	Lateness Percentiles `json:"lateness"`
	// Series is the bytes delivered in each SeriesStep since Start (the
	// first SeriesMax steps): the link's throughput over time, for
	// recovery after a capacity step or an outage.
	Series []uint64 `json:"delivered_bytes_per_100ms,omitempty"`
}

// SeriesStep is the width of a DirStats.Series bucket; SeriesMax bounds
// the buckets kept (10 minutes).
const (
	SeriesStep = 100 * time.Millisecond
	SeriesMax  = 6000
)

// DeliveredRate is the rate of delivered IP bytes between the first and
// the last delivery, in bits/s.
func (s DirStats) DeliveredRate() float64 {
	d := s.LastDelivery - s.FirstDelivery
	if d <= 0 {
		return 0
	}
	return float64(s.BytesDelivered) * 8 / d.Seconds()
}

// Percentiles of a duration sample.
type Percentiles struct {
	N    int           `json:"n"`
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
}

// PercentilesOf computes percentiles of a sample (which it sorts).
func PercentilesOf(s []time.Duration) Percentiles {
	if len(s) == 0 {
		return Percentiles{}
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return Percentiles{N: len(s), P50: q(0.50), P99: q(0.99), P999: q(0.999), Max: s[len(s)-1]}
}

func (p Percentiles) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v p99.9=%v max=%v", p.N, p.P50, p.P99, p.P999, p.Max)
}

// Report is the emulator's account of its own accuracy, both directions.
type Report struct {
	Up   DirStats `json:"up"`
	Down DirStats `json:"down"`
}

func (s DirStats) String() string {
	return fmt.Sprintf("%s: in %d pkts, lost %d, dropped %d, delivered %d pkts at %.2f Mbit/s (setting %.2f), max queue %d, lateness %v",
		s.Dir, s.PacketsIn, s.Lost, s.Dropped, s.Delivered, s.DeliveredRate()/1e6, s.SettingRate/1e6, s.MaxQueue, s.Lateness)
}

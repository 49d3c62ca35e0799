package api

// SpeedLane is one lane whose send rate lanesd holds by its CPU share
// (cpu.send_rate) in lanes status.
type SpeedLane struct {
	Lane string `json:"lane"`
	// Target and Rate are bits per second: the rate asked and the send
	// rate measured (smoothed).
	Target float64 `json:"target_bps"`
	Rate   float64 `json:"rate_bps"`
	// Share is the CPU share given now, Use what the lane used over the
	// last second, both in percent of one CPU; Max the most it may get.
	Share float64 `json:"share"`
	Use   float64 `json:"use"`
	Max   float64 `json:"max_share"`
	Error string  `json:"error,omitempty"`
}

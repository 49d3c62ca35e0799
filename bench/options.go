package bench

import (
	"io"
	"time"
)

// Options of a benchmark run.
type Options struct {
	// Scenario is the path of the scenario file.
	Scenario string
	// OutDir receives <scenario>.json, .md and .svg ("." if empty).
	OutDir string
	// Repeats overrides the scenario's repeat count when > 0.
	Repeats int
	// Arms selects a subset of the scenario's arms; empty runs all.
	Arms []string
	// LanesBin is the path of the lanes binary, $LANES in arm commands.
	LanesBin string
	// Progress receives a line per phase while the run goes on.
	Progress io.Writer
	Logf     func(format string, args ...any)
	// Duration overrides the scenario's phase length when > 0 (quick
	// runs, CI).
	Duration time.Duration
	// Intensities and PIs, if set, replace the matrix's (percent; PI
	// values as in the scenario file), e.g. to repeat a few cells more.
	Intensities []float64
	PIs         []string
	// CC and Offloads, if set, replace the scenario's axes: every variant
	// runs once per congestion control and offload setting.
	CC, Offloads []string
}

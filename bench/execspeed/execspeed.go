package execspeed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Parts of the experiment.
const (
	PartFigure4 = "figure4" // send rate against CPU share, open loop
	PartHist    = "hist"    // packet inter-arrival histograms
	PartHold    = "hold"    // cpu.send_rate against load that comes and goes
	PartReserve = "reserve" // cpu.reserve's share in every 100 ms window
)

// Parts lists every part in run order.
var Parts = []string{PartFigure4, PartHist, PartHold, PartReserve}

// Options of an experiment run.
type Options struct {
	OutDir    string
	LanesBin  string // re-executed as the sender and the busy loops
	LanesdBin string // default: lanesd beside LanesBin
	Parts     []string
	// Work is the sender's rounds of SHA-256 per datagram.
	Work int
	// Shares are Figure 4's CPU shares, percent of one CPU.
	Shares []float64
	// Point is how long each share is measured.
	Point time.Duration
	// HistShares are the shares whose inter-arrival histograms are drawn.
	HistShares []float64
	// Hold is the length of the hold run (load comes at a third, goes at
	// two thirds); Target the rate held, as a share of the free rate.
	Hold   time.Duration
	Target float64
	// Windows is how many 100 ms windows each reservation arm measures.
	Windows  int
	Progress io.Writer
	Logf     func(string, ...any)
}

func (o *Options) defaults() error {
	if len(o.Parts) == 0 {
		o.Parts = Parts
	}
	for _, p := range o.Parts {
		if !slices.Contains(Parts, p) {
			return fmt.Errorf("unknown part %q (want %s)", p, strings.Join(Parts, ", "))
		}
	}
	if o.Work == 0 {
		o.Work = 40
	}
	if o.Work < 1 || o.Work > 100000 {
		return fmt.Errorf("work %d is outside 1..100000", o.Work)
	}
	if len(o.Shares) == 0 {
		o.Shares = []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	}
	if len(o.HistShares) == 0 {
		o.HistShares = []float64{25, 50, 75}
	}
	for _, s := range append(slices.Clone(o.Shares), o.HistShares...) {
		if !(s > 0 && s <= 100) {
			return fmt.Errorf("share %g is outside (0, 100]", s)
		}
	}
	if o.Point == 0 {
		o.Point = 3 * time.Second
	}
	if o.Hold == 0 {
		o.Hold = 30 * time.Second
	}
	if o.Target == 0 {
		o.Target = 0.5
	}
	if !(o.Target > 0 && o.Target < 1) {
		return fmt.Errorf("target %g is outside (0, 1): a share of the free rate", o.Target)
	}
	if o.Windows == 0 {
		o.Windows = 50
	}
	if o.Point < time.Second || o.Hold < 6*time.Second || o.Windows < 5 {
		return errors.New("point must be at least 1s, hold at least 6s, windows at least 5")
	}
	if o.OutDir == "" {
		o.OutDir = "."
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// Point is one share of Figure 4.
type Point struct {
	Share float64 `json:"share"` // percent of one CPU
	Mbps  float64 `json:"mbps"`  // received payload
	Use   float64 `json:"use"`   // CPU the sender got, percent of one CPU
}

// Hist is one histogram of inter-arrival times.
type Hist struct {
	Share  float64 `json:"share"`
	Period string  `json:"period"` // the quota's period
	Bin    string  `json:"bin"`
	// Shares are the long gaps (a bin or more) per bin, as shares of
	// all long gaps; Long the share of all gaps that are long.
	Shares []float64 `json:"shares"`
	Long   float64   `json:"long"`
	Median float64   `json:"median_us"`
	Max    float64   `json:"max_us"`
	// Delayed is the share of the run's time spent in long gaps.
	Delayed float64 `json:"delayed"`
}

// Hold is one run holding a rate: per-second received rates.
type Hold struct {
	Arm     string    `json:"arm"` // "send_rate" or "fixed share"
	Target  float64   `json:"target_mbps"`
	Seconds []float64 `json:"mbps_per_second"`
	// Worst is the largest deviation of a 5 s mean from the target
	// after the first 5 s; Mean the mean after the first 5 s.
	Worst float64 `json:"worst_5s_dev"`
	Mean  float64 `json:"mean_mbps"`
	Share string  `json:"share"`
}

// Reserve is one reservation arm: the loop's share of a CPU in every
// 100 ms window against busy loops, and alone.
type Reserve struct {
	Arm       string    `json:"arm"`
	Mechanism string    `json:"mechanism"`
	Windows   []float64 `json:"windows"`
	Alone     float64   `json:"alone_median"`
	// TickAssist is lanesd's tick assist as its status gave it at the
	// end (CFS bandwidth only); Assist the CPU its threads used over the
	// windows and Others what the busy loops got, both in percent of a
	// CPU.
	TickAssist string  `json:"tick_assist,omitempty"`
	Assist     float64 `json:"assist_pct"`
	Others     float64 `json:"others_pct"`
	Error      string  `json:"error,omitempty"`
}

// Results of a run.
type Results struct {
	Started time.Time `json:"started"`
	Host    string    `json:"host"`
	Work    int       `json:"work"`
	Free    float64   `json:"free_mbps"`
	Figure4 []Point   `json:"figure4,omitempty"`
	Fit     *Fit      `json:"fit,omitempty"`
	Hists   []Hist    `json:"hists,omitempty"`
	Holds   []Hold    `json:"holds,omitempty"`
	Reserve []Reserve `json:"reserve,omitempty"`
	Hogs    int       `json:"hogs"`
}

// Write writes execspeed.json and execspeed.md into dir.
func (r *Results) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "execspeed.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "execspeed.md"), []byte(r.Markdown()), 0o644)
}

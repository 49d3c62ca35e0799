package ch5

import (
	"fmt"
	"io"
	"time"
)

// Options are the experiment's settings (`lanes bench ch5` flags).
type Options struct {
	OutDir     string
	Arms       []string      // default: every arm, in Arms order
	Duration   time.Duration // per arm; default 60s
	Contention time.Duration // when the CPU hogs and the greedy flow start; default 10s
	StressCPU  int           // stress-ng --cpu workers on each end; default 2
	LinkRate   uint64        // bits/s each way; default 10 Mbit/s
	Delay      time.Duration // one way; default 10ms (RTT 20 ms)
	Queue      int           // emulator queue, packets; default 100
	ConfigDir  string        // the arms' lanesd configs; default bench/ch5
	LanesBin   string        // the lanes binary (this one)
	LanesdBin  string        // default: lanesd beside LanesBin
	Progress   io.Writer
	Logf       func(string, ...any)
}

func (o *Options) defaults() error {
	if o.Duration == 0 {
		o.Duration = 60 * time.Second
	}
	if o.Contention == 0 {
		o.Contention = 10 * time.Second
	}
	if o.StressCPU == 0 {
		o.StressCPU = 2
	}
	if o.LinkRate == 0 {
		o.LinkRate = 10_000_000
	}
	if o.Delay == 0 {
		o.Delay = 10 * time.Millisecond
	}
	if o.Queue == 0 {
		o.Queue = 100
	}
	if o.ConfigDir == "" {
		o.ConfigDir = "bench/ch5"
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
	switch {
	case o.Duration < 10*time.Second || o.Duration > 10*time.Minute:
		return fmt.Errorf("duration %v: want 10s..10m", o.Duration)
	case o.Contention < 0 || o.Contention >= o.Duration-3*time.Second:
		return fmt.Errorf("contention at %v: want within the run and at least 3 s before its end (%v)", o.Contention, o.Duration)
	case o.StressCPU < 0 || o.StressCPU > 64:
		return fmt.Errorf("stress-cpu %d: want 0..64", o.StressCPU)
	case o.Delay < 0 || o.Delay > time.Second:
		return fmt.Errorf("delay %v: want 0..1s", o.Delay)
	case o.Queue < 1 || o.Queue > 100000:
		return fmt.Errorf("queue %d: want 1..100000 packets", o.Queue)
	}
	for _, a := range o.Arms {
		if _, ok := armByName(a); !ok {
			return fmt.Errorf("arm %q: want one of none, app, rm, integrated", a)
		}
	}
	return nil
}

// Arm is one way of running the video.
type Arm struct {
	Name        string
	Description string
	Adapt       bool   // the sender adapts its quality from the receiver's feedback
	Config      string // lanesd config file in ConfigDir ("" = no lanesd)
	Directives  bool   // the receiver follows lanesd's quality directives and relays them to the sender
}

// Arms are the experiment's arms, after the seed's chapter 5.
var Arms = []Arm{
	{Name: "none", Description: "no management: the video in no lane, fixed quality 100"},
	{Name: "app", Description: "application adaptation only: the sender lowers its quality when the receiver's fps (fed back each second) is below 19, raises it at 19.5+ with headroom; no lanesd", Adapt: true},
	{Name: "rm", Description: "resource management only: lanesd, both ends in lane video, a controller on the lane's CPU weight and network rate from the receiver's fps report; fixed quality 100", Config: "rm.toml"},
	{Name: "integrated", Description: "integrated: lanesd, one controller moving the video lane's CPU weight, network rate and the sender's quality (directives) together", Config: "integrated.toml", Directives: true},
}

func armByName(n string) (Arm, bool) {
	for _, a := range Arms {
		if a.Name == n {
			return a, true
		}
	}
	return Arm{}, false
}

// ArmResult is what one arm measured.
type ArmResult struct {
	Arm         string           `json:"arm"`
	Description string           `json:"description"`
	Receiver    []ReceiverSecond `json:"receiver"`
	Sender      []SenderSecond   `json:"sender"`
	HostBusy    []float64        `json:"host_busy"` // the host's CPU busy share per second, 0..1
	LoadStart   string           `json:"load_start"`
	LoadEnd     string           `json:"load_end"`
	Errors      []string         `json:"errors,omitempty"`
	Lanesd      string           `json:"lanesd_log,omitempty"` // the tail of lanesd's log
	TC          string           `json:"tc,omitempty"`         // tc -s class and qdisc of the shaped interface at the end
	Summary     Summary          `json:"summary"`
}

// Summary is an arm's figures over the contended part of the run.
type Summary struct {
	FPSBefore     float64 `json:"fps_before"`     // mean fps before contention (from second 2)
	FPSDuring     float64 `json:"fps_during"`     // mean fps from contention+3 s
	FPSMin        int     `json:"fps_min"`        // lowest second from contention+3 s
	FPSMax        int     `json:"fps_max"`        // highest second from contention+3 s
	Held          float64 `json:"held"`           // share of the seconds from contention+3 s with >= 19 fps
	Seconds       int     `json:"seconds"`        // how many seconds that is
	JitterDuring  float64 `json:"jitter_ms"`      // mean per-second jitter from contention+3 s
	QualityDuring float64 `json:"quality"`        // mean quality displayed from contention+3 s
	PSNRDuring    float64 `json:"psnr"`           // mean PSNR displayed from contention+3 s
	OnsetMin      int     `json:"onset_fps_min"`  // lowest second in the 3 s after contention starts
	EncodeCPU     float64 `json:"encode_cpu_ms"`  // sender's CPU per frame before contention (ms)
	DecodeCPU     float64 `json:"decode_cpu_ms"`  // receiver's CPU per frame before contention (ms)
	EncodeQuality float64 `json:"encode_quality"` // the quality those were measured at
}

// Summarize computes an arm's summary; contention is the second the
// disturbance starts.
func Summarize(r *ArmResult, contention int) Summary {
	var s Summary
	var nb, nd, ne int
	var cpuE, cpuD, qE float64
	s.FPSMin = -1
	s.OnsetMin = -1
	for _, x := range r.Receiver {
		switch {
		case x.T >= 2 && x.T < contention:
			s.FPSBefore += float64(x.Frames)
			nb++
			if x.Frames > 0 {
				cpuD += x.DecodeCPU
				nd++
			}
		case x.T >= contention && x.T < contention+3:
			if s.OnsetMin < 0 || x.Frames < s.OnsetMin {
				s.OnsetMin = x.Frames
			}
		case x.T >= contention+3:
			s.Seconds++
			s.FPSDuring += float64(x.Frames)
			s.JitterDuring += x.Jitter
			s.QualityDuring += x.Quality * float64(x.Frames)
			s.PSNRDuring += x.PSNR * float64(x.Frames)
			if x.Frames >= TargetFPS-1 {
				s.Held++
			}
			if s.FPSMin < 0 || x.Frames < s.FPSMin {
				s.FPSMin = x.Frames
			}
			s.FPSMax = max(s.FPSMax, x.Frames)
		}
	}
	for _, x := range r.Sender {
		if x.T >= 2 && x.T < contention && x.Frames > 0 {
			cpuE += x.EncodeCPU
			qE += x.Quality
			ne++
		}
	}
	if nb > 0 {
		s.FPSBefore /= float64(nb)
	}
	if nd > 0 {
		s.DecodeCPU = cpuD / float64(nd)
	}
	if ne > 0 {
		s.EncodeCPU = cpuE / float64(ne)
		s.EncodeQuality = qE / float64(ne)
	}
	if s.Seconds > 0 {
		frames := s.FPSDuring
		s.FPSDuring /= float64(s.Seconds)
		s.JitterDuring /= float64(s.Seconds)
		s.Held /= float64(s.Seconds)
		if frames > 0 {
			s.QualityDuring /= frames
			s.PSNRDuring /= frames
		}
	}
	s.FPSMin = max(s.FPSMin, 0)
	s.OnsetMin = max(s.OnsetMin, 0)
	return s
}

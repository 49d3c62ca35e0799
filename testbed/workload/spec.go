package workload

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Kinds of workload.
const (
	IPerf3   = "iperf3"    // TCP (CC) or UDP (Rate) bulk transfer
	IRTT     = "irtt"      // isochronous round trips: latency
	Audio    = "audio"     // Go: PacketBytes every Interval over UDP
	Video    = "video"     // Go: frames of FrameBytes at FPS over UDP
	ReqResp  = "rr"        // Go: request/response over TCP with think times
	Fio      = "fio"       // disk load, Args passed to fio
	StressNG = "stress-ng" // CPU/memory load, Args passed to stress-ng
	// Pulse is TCP at an intensity (seed 003): the sender writes as fast
	// as the socket takes data during the first Intensity·Period of every
	// Period and is silent for the rest.
	Pulse = "pulse"
	// Greedy is seed 003's greedy UDP background: datagrams of
	// PacketBytes as fast as the socket takes them (capped at Rate if set);
	// when the kernel refuses one (ENOBUFS: the qdisc is full; EAGAIN: the
	// socket buffer is) the sender sleeps a random 10–15 ms.
	Greedy = "greedy"
)

// DefaultPeriod is the period of an intensity's duty cycle: seed 003 makes
// at least one request per 100 ms scheduling quantum.
const DefaultPeriod = 100 * time.Millisecond

// Spec describes one workload of a scenario.
type Spec struct {
	Name string // unique within a scenario, e.g. "fg"
	Kind string
	// Direction "up" sends from src to dst, "down" from dst to src. The
	// client process always runs in src (the host lanes manages). For rr
	// the direction is the responses': "up" puts the responder in src and
	// the requester in dst; empty or "down" the requester in src.
	Direction string
	Path      int // which path of the topology (0 for the line)
	Port      int // base port; 0 picks one from the workload's index

	CC       string // iperf3 TCP congestion control ("cubic")
	Protocol string // iperf3: "tcp" (default) or "udp"
	Rate     uint64 // iperf3 UDP rate, bits/s
	Streams  int    // iperf3 parallel streams (default 1)
	// TOS is the IPv4 TOS byte iperf3's data packets carry, set by
	// whichever end sends (the server in direction "down"): 4 is DSCP LE
	// (RFC 8622), 0x20 CS1. 0 leaves it alone.
	TOS      int
	Interval time.Duration // irtt and audio send interval
	// PacketBytes is the audio packet size (default 80) or irtt length.
	PacketBytes int
	FPS         int // video frames per second
	FrameBytes  int // video frame size
	ReqBytes    int // rr request size
	RespBytes   int // rr response size
	Think       time.Duration
	ThinkExp    bool     // exponential think times with mean Think
	Args        []string // fio / stress-ng arguments
	// Intensity is the foreground's duty cycle in (0, 1] (pulse, rr): the
	// share of each Period in which it generates requests (seed 003's
	// intensity). 0 means 1: always.
	Intensity float64
	// Period of the duty cycle (DefaultPeriod if 0).
	Period time.Duration
	// SndBuf is the sender's SO_SNDBUF in bytes: pulse's default is the
	// kernel's autotuning (its unsent data is bounded by
	// TCP_NOTSENT_LOWAT instead), greedy's 4 MiB, so that the qdisc, not
	// the socket, refuses datagrams first.
	SndBuf int
	// Warmup is the first part of the run left out of the throughput
	// (iperf3): a background flow started early is measured over the same
	// window as the others.
	Warmup time.Duration
}

// Validate checks a spec.
func (s Spec) Validate() error {
	switch s.Kind {
	case IPerf3, IRTT, Audio, Video, ReqResp, Fio, StressNG, Pulse, Greedy:
	default:
		return fmt.Errorf("workload %s: unknown kind %q", s.Name, s.Kind)
	}
	if s.Direction != "" && s.Direction != "up" && s.Direction != "down" {
		return fmt.Errorf("workload %s: direction %q: want up or down", s.Name, s.Direction)
	}
	if s.Kind == IPerf3 && s.Protocol == "udp" && s.Rate == 0 {
		return fmt.Errorf("workload %s: udp needs a rate", s.Name)
	}
	if s.TOS < 0 || s.TOS > 255 {
		return fmt.Errorf("workload %s: tos %d: want a byte, 0-255", s.Name, s.TOS)
	}
	if s.TOS != 0 && s.Kind != IPerf3 {
		return fmt.Errorf("workload %s: tos applies to iperf3, not %s", s.Name, s.Kind)
	}
	if s.Intensity < 0 || s.Intensity > 1 {
		return fmt.Errorf("workload %s: intensity %v: want a share in (0, 1]", s.Name, s.Intensity)
	}
	if s.Intensity > 0 && s.Kind != Pulse && s.Kind != ReqResp {
		return fmt.Errorf("workload %s: intensity applies to pulse and rr, not %s", s.Name, s.Kind)
	}
	if s.Period < 0 || s.SndBuf < 0 {
		return fmt.Errorf("workload %s: negative period or sndbuf", s.Name)
	}
	if s.Kind == Audio && s.PacketBytes != 0 && s.PacketBytes < headerBytes {
		return fmt.Errorf("workload %s: packet_bytes %d: audio packets carry a %d-byte header, want at least %d", s.Name, s.PacketBytes, headerBytes, headerBytes)
	}
	if s.Kind == Video && (s.FPS <= 0 || s.FrameBytes <= 0) {
		return fmt.Errorf("workload %s: video needs fps and frame_bytes", s.Name)
	}
	return nil
}

// Result is what one run of a workload measured.
type Result struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Throughput is the goodput in bits/s at the receiver (bulk transfers,
	// generators); for fio the bytes/s of I/O times 8; for stress-ng bogo
	// operations per second.
	Throughput float64 `json:"throughput"`
	// Latency percentiles: RTT for irtt and rr, one-way for audio and
	// video frames. Zero when not measured.
	LatencyP50 time.Duration `json:"latency_p50_ns,omitempty"`
	LatencyP99 time.Duration `json:"latency_p99_ns,omitempty"`
	// Loss is the fraction of packets (or frames) that did not arrive.
	Loss float64 `json:"loss,omitempty"`
	// Jitter: for audio, seed 000's measure (standard deviation of
	// |inter-send time − interval| at the sender) is SendJitter, and the
	// same at the receiver is Jitter; for video, the standard deviation of
	// frame inter-completion times minus 1/fps.
	Jitter     time.Duration `json:"jitter_ns,omitempty"`
	SendJitter time.Duration `json:"send_jitter_ns,omitempty"`
	FPS        float64       `json:"fps,omitempty"` // video: complete frames per second
	Count      int           `json:"count,omitempty"`
	// Stalls counts the greedy sender's back-offs (a datagram refused
	// with ENOBUFS or EAGAIN, then 10–15 ms asleep).
	Stalls int `json:"stalls,omitempty"`
	// MaxStall is a TCP transfer's longest time without a byte arriving
	// at the receiver (iperf3, in 100 ms intervals).
	MaxStall time.Duration `json:"max_stall_ns,omitempty"`
	// Retransmits is the segments an upload's sender (iperf3's client)
	// retransmitted over its whole run, from its own count: what the
	// link carried that the receiver's goodput does not count.
	Retransmits int `json:"retransmits,omitempty"`
}

func percentile(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := append([]time.Duration(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c[min(len(c)-1, int(p*float64(len(c))))]
}

// absDevSD is seed 000's jitter: the standard deviation of |d − want|
// over the gaps d.
func absDevSD(gaps []time.Duration, want time.Duration) time.Duration {
	if len(gaps) < 2 {
		return 0
	}
	var sum, sq float64
	for _, g := range gaps {
		x := math.Abs(float64(g - want))
		sum += x
		sq += x * x
	}
	n := float64(len(gaps))
	mean := sum / n
	return time.Duration(math.Sqrt(max(0, sq/n-mean*mean)))
}

package hotspot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"time"
)

// AudioConfig is the audio sender's request (`lanes bench hotspotaudio
// CONFIG`): the seed's audio-like application, Bytes every Interval over
// UDP to To for Duration.
type AudioConfig struct {
	To       string        `json:"to"`
	Duration time.Duration `json:"duration"`
	Interval time.Duration `json:"interval"`
	Bytes    int           `json:"bytes"`
}

// AudioResult is what the sender measured at its sendto calls.
type AudioResult struct {
	Sent int `json:"sent"`
	// Jitter is the seed's measure: the standard deviation of
	// |inter-send time − interval|.
	Jitter time.Duration `json:"jitter_ns"`
}

// AudioMain runs the sender and prints its AudioResult as JSON. Each
// datagram is due at start + i·interval; the time of each sendto is
// recorded.
func AudioMain(ctx context.Context, config string, out io.Writer) error {
	var c AudioConfig
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		return fmt.Errorf("audio config: %w", err)
	}
	if c.Interval <= 0 || c.Duration <= 0 || c.Bytes <= 0 || c.Bytes > 65000 {
		return fmt.Errorf("audio config %+v: interval, duration and bytes (at most 65000) must be positive", c)
	}
	to, err := net.ResolveUDPAddr("udp", c.To)
	if err != nil {
		return fmt.Errorf("audio: %w", err)
	}
	// Unconnected: an ICMP port unreachable from a host without a
	// receiver does not fail later sends.
	conn, err := net.ListenUDP("udp", nil)
	if err != nil {
		return fmt.Errorf("audio: %w", err)
	}
	defer conn.Close()
	buf := make([]byte, c.Bytes)
	n := int(c.Duration / c.Interval)
	sends := make([]time.Time, 0, n)
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if d := time.Until(start.Add(time.Duration(i) * c.Interval)); d > 0 {
			time.Sleep(d)
		}
		conn.WriteToUDP(buf, to)
		sends = append(sends, time.Now())
	}
	r := AudioResult{Sent: len(sends), Jitter: sendJitter(sends, c.Interval)}
	return json.NewEncoder(out).Encode(r)
}

// sendJitter is the standard deviation of |gap − interval| over the
// gaps between consecutive sends.
func sendJitter(sends []time.Time, interval time.Duration) time.Duration {
	if len(sends) < 3 {
		return 0
	}
	devs := make([]float64, 0, len(sends)-1)
	var mean float64
	for i := 1; i < len(sends); i++ {
		d := math.Abs(float64(sends[i].Sub(sends[i-1]) - interval))
		devs = append(devs, d)
		mean += d
	}
	mean /= float64(len(devs))
	var v float64
	for _, d := range devs {
		v += (d - mean) * (d - mean)
	}
	return time.Duration(math.Sqrt(v / float64(len(devs)-1)))
}

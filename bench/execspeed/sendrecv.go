package execspeed

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"
)

// Payload is the size of a datagram.
const Payload = 1200

// SendOptions are a CPU-bound sender's: Work rounds of SHA-256 over the
// datagram before each send, for at most Duration; from After on (if
// set), Work2 rounds (the data got harder to compress).
type SendOptions struct {
	Addr     string
	Work     int
	Duration time.Duration
	Work2    int
	After    time.Duration
}

// Send sends datagrams to o.Addr over a connected UDP socket (write(2),
// so that /proc/PID/io counts them) as fast as its CPU allows, each after
// o.Work rounds of hashing whose digest goes into the datagram. It
// returns how many it sent.
func Send(ctx context.Context, o SendOptions) (int, error) {
	if o.Work < 0 || o.Work > 1_000_000 || o.Work2 < 0 || o.Work2 > 1_000_000 {
		return 0, fmt.Errorf("work %d, %d is outside 0..1000000", o.Work, o.Work2)
	}
	if o.Duration <= 0 || o.Duration > time.Hour {
		return 0, fmt.Errorf("duration %v is outside (0, 1h]", o.Duration)
	}
	c, err := net.Dial("udp", o.Addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, Payload)
	start := time.Now()
	end := start.Add(o.Duration)
	n := 0
	work := o.Work
	for now := start; now.Before(end) && ctx.Err() == nil; now = time.Now() {
		if o.After > 0 && now.Sub(start) >= o.After {
			work = o.Work2
		}
		binary.BigEndian.PutUint64(buf, uint64(n))
		for range work {
			sum := sha256.Sum256(buf)
			copy(buf[8:], sum[:])
		}
		if _, err := c.Write(buf); err != nil {
			var op *net.OpError
			if errors.As(err, &op) {
				continue // the receiver not there yet (ICMP refusal), or a full buffer
			}
			return n, err
		}
		n++
	}
	return n, nil
}

// Arrivals are the receive times of datagrams, in order.
type Arrivals struct {
	At    []time.Duration // since Start
	Start time.Time
	Bytes int
}

// Receive listens on addr and timestamps every datagram until ctx ends
// or d has passed; keep false counts them only (a sink).
func Receive(ctx context.Context, addr string, d time.Duration, keep bool) (*Arrivals, error) {
	a := &Arrivals{Start: time.Now()}
	if err := ReceiveInto(ctx, addr, d, keep, a); err != nil && len(a.At) == 0 && a.Bytes == 0 {
		return nil, err
	} else if err != nil {
		return a, err
	}
	return a, nil
}

// ReceiveInto is Receive into a, whose Start the caller set (and may
// read while it runs; At and Bytes are the receiver's until it returns).
func ReceiveInto(ctx context.Context, addr string, d time.Duration, keep bool, a *Arrivals) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	defer pc.Close()
	end := time.Now().Add(d)
	buf := make([]byte, 65536)
	for ctx.Err() == nil && time.Now().Before(end) {
		dl := time.Now().Add(100 * time.Millisecond)
		if dl.After(end) {
			dl = end
		}
		pc.SetReadDeadline(dl)
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		a.Bytes += n
		if keep {
			a.At = append(a.At, time.Since(a.Start))
		}
	}
	return nil
}

// Rate is the receive rate in bits per second over [from, to).
func (a *Arrivals) Rate(from, to time.Duration) float64 {
	if to <= from {
		return 0
	}
	i := sort.Search(len(a.At), func(i int) bool { return a.At[i] >= from })
	j := sort.Search(len(a.At), func(i int) bool { return a.At[i] >= to })
	return float64(j-i) * Payload * 8 / (to - from).Seconds()
}

// Gaps are the inter-arrival times over [from, to).
func (a *Arrivals) Gaps(from, to time.Duration) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(a.At); i++ {
		if a.At[i-1] >= from && a.At[i] < to {
			out = append(out, a.At[i]-a.At[i-1])
		}
	}
	return out
}

// Spin is a busy loop for d (a CPU hog, and the reservations' subject).
func Spin(ctx context.Context, d time.Duration) {
	end := time.Now().Add(d)
	x := 0
	for time.Now().Before(end) && ctx.Err() == nil {
		for i := range 1_000_000 {
			x += i
		}
	}
	_ = x
}

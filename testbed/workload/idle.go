package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/testbed/netns"
)

// Seed 003's workloads: a foreground at an intensity (pulse: TCP sent
// during a share of each period; rr with the same duty cycle, in rr.go's
// runReqResp) and a greedy UDP background. Their senders run in a process
// of their own when Env.Gen names a generator, so that the sender can be
// put into a lane by Env.Wrap (lanes classifies sockets by the cgroup of
// the process that opens them); receivers run in the runner and count the
// bytes that arrive in the measured window.

// GenRequest asks a generator to send: what Generate runs, and what a
// generator process (Env.Gen) receives as its last argument, as JSON.
type GenRequest struct {
	Kind        string        `json:"kind"` // Pulse or Greedy
	To          string        `json:"to"`   // receiver, host:port
	Duration    time.Duration `json:"duration"`
	Intensity   float64       `json:"intensity,omitempty"`
	Period      time.Duration `json:"period,omitempty"`
	SndBuf      int           `json:"sndbuf,omitempty"`
	Rate        uint64        `json:"rate,omitempty"` // greedy: cap in bits/s, 0 none
	PacketBytes int           `json:"packet_bytes,omitempty"`
	CC          string        `json:"cc,omitempty"`
	Seed        uint64        `json:"seed,omitempty"`
}

// GenStats is what a sender reports when done.
type GenStats struct {
	Bytes  int64 `json:"bytes"`  // payload bytes the socket took
	Stalls int   `json:"stalls"` // greedy: back-offs after ENOBUFS/EAGAIN
}

// Generate runs a sender in the calling thread's network namespace until
// its duration is over or ctx ends.
func Generate(ctx context.Context, g GenRequest) (GenStats, error) {
	if g.Duration <= 0 {
		return GenStats{}, fmt.Errorf("generate %s: duration %v: want > 0", g.Kind, g.Duration)
	}
	if g.Period <= 0 {
		g.Period = DefaultPeriod
	}
	if g.Intensity <= 0 || g.Intensity > 1 {
		g.Intensity = 1
	}
	switch g.Kind {
	case Pulse:
		return sendPulse(ctx, g)
	case Greedy:
		if g.SndBuf == 0 {
			g.SndBuf = 4 << 20
		}
		if g.PacketBytes == 0 {
			g.PacketBytes = 1400
		}
		return sendGreedy(ctx, g)
	}
	return GenStats{}, fmt.Errorf("generate: kind %q: want %s or %s", g.Kind, Pulse, Greedy)
}

// GenMain is a generator process's body: arg is a GenRequest as JSON;
// the GenStats are written to w as JSON.
func GenMain(ctx context.Context, arg string, w io.Writer) error {
	var g GenRequest
	dec := json.NewDecoder(strings.NewReader(arg))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return fmt.Errorf("generator request: %w", err)
	}
	st, err := Generate(ctx, g)
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(st)
}

// duty returns the end of the current on-window of a duty cycle that
// started at start, and whether now is inside it; outside, the returned
// time is the start of the next period.
func duty(start, now time.Time, period time.Duration, intensity float64) (time.Time, bool) {
	k := now.Sub(start) / period
	ps := start.Add(k * period)
	on := ps.Add(time.Duration(intensity * float64(period)))
	if now.Before(on) {
		return on, true
	}
	return ps.Add(period), false
}

// bins counts the bytes a receiver got per millisecond since t0.
type bins struct {
	t0 time.Time
	b  []int64
}

func newBins(t0 time.Time, d time.Duration) *bins {
	return &bins{t0: t0, b: make([]int64, int(d/time.Millisecond)+2000)}
}

func (b *bins) add(at time.Time, n int) {
	i := int(at.Sub(b.t0) / time.Millisecond)
	if i >= 0 && i < len(b.b) {
		b.b[i] += int64(n)
	}
}

// rate is the throughput in bits/s over [from, to) since t0.
func (b *bins) rate(from, to time.Duration) float64 {
	var sum int64
	lo, hi := int(from/time.Millisecond), min(len(b.b), int(to/time.Millisecond))
	for i := lo; i < hi; i++ {
		sum += b.b[i]
	}
	if to <= from {
		return 0
	}
	return float64(sum) * 8 / (to - from).Seconds()
}

// sendEnds returns the sender's and receiver's namespaces and the
// receiver's address.
func (e Env) sendEnds(s Spec) (sendNS, recvNS string, to net.IP, err error) {
	cliNS, srvNS, cliAddr, srvAddr, err := e.ends(s)
	if err != nil {
		return "", "", nil, err
	}
	if s.Direction == "down" {
		return srvNS, cliNS, cliAddr.AsSlice(), nil
	}
	return cliNS, srvNS, srvAddr.AsSlice(), nil
}

// send runs g's sender in ns: in a generator process (Env.Gen, under
// Env.Wrap when ns is src) or, with no generator, on a thread of this
// process.
func (e Env) send(ctx context.Context, ns string, g GenRequest) (GenStats, error) {
	if len(e.Gen) == 0 {
		if len(e.Wrap) > 0 {
			return GenStats{}, fmt.Errorf("a wrapped %s sender needs a generator process (Env.Gen: the lanes binary)", g.Kind)
		}
		var st GenStats
		err := netns.Do(ns, func() (err error) { st, err = Generate(ctx, g); return err })
		return st, err
	}
	req, err := json.Marshal(g)
	if err != nil {
		return GenStats{}, fmt.Errorf("encode generator request: %w", err)
	}
	argv := append(append([]string(nil), e.Gen...), string(req))
	if ns != e.Topo.Src && len(e.Wrap) > 0 {
		return GenStats{}, fmt.Errorf("the %s sender runs in the far end (direction down) and cannot be wrapped", g.Kind)
	}
	cmd := e.command(ctx, ns, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return GenStats{}, fmt.Errorf("generator %s: %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	var st GenStats
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
		return GenStats{}, fmt.Errorf("generator output %q: %w", stdout.String(), err)
	}
	return st, nil
}

// measured is the window a workload's throughput counts: after the
// warmup, to the end of its run.
func measured(s Spec, dur time.Duration) (time.Duration, time.Duration) {
	from := min(s.Warmup, dur/2)
	return from, dur
}

func runPulse(ctx context.Context, env Env, s Spec, dur time.Duration) (Result, error) {
	sendNS, recvNS, to, err := env.sendEnds(s)
	if err != nil {
		return Result{}, err
	}
	addr := &net.TCPAddr{IP: to, Port: env.port(s)}
	var ln *net.TCPListener
	if err := netns.Do(recvNS, func() (err error) { ln, err = net.ListenTCP("tcp4", addr); return err }); err != nil {
		return Result{}, fmt.Errorf("listen %v: %w", addr, err)
	}
	defer ln.Close()
	t0 := time.Now()
	b := newBins(t0, dur)
	var wg sync.WaitGroup
	var conn net.Conn
	var connMu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		connMu.Lock()
		conn = c
		connMu.Unlock()
		buf := make([]byte, 256<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				b.add(time.Now(), n)
			}
			if err != nil {
				return
			}
		}
	}()
	g := GenRequest{Kind: Pulse, To: addr.String(), Duration: dur, Intensity: s.Intensity, Period: s.Period,
		SndBuf: s.SndBuf, CC: s.CC}
	_, serr := env.send(ctx, sendNS, g)
	ln.Close()
	connMu.Lock()
	if conn != nil {
		conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	}
	connMu.Unlock()
	wg.Wait()
	if serr != nil {
		return Result{}, serr
	}
	from, until := measured(s, dur)
	return Result{Throughput: b.rate(from, until)}, nil
}

func runGreedy(ctx context.Context, env Env, s Spec, dur time.Duration) (Result, error) {
	sendNS, recvNS, to, err := env.sendEnds(s)
	if err != nil {
		return Result{}, err
	}
	addr := &net.UDPAddr{IP: to, Port: env.port(s)}
	var rcv *net.UDPConn
	if err := netns.Do(recvNS, func() (err error) { rcv, err = net.ListenUDP("udp4", addr); return err }); err != nil {
		return Result{}, fmt.Errorf("listen %v: %w", addr, err)
	}
	defer rcv.Close()
	rcv.SetReadBuffer(8 << 20)
	t0 := time.Now()
	b := newBins(t0, dur)
	done := make(chan int, 1)
	go func() {
		buf := make([]byte, 65536)
		count := 0
		for {
			n, err := rcv.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) || isTimeout(err) {
					done <- count
					return
				}
				continue
			}
			b.add(time.Now(), n)
			count++
		}
	}()
	g := GenRequest{Kind: Greedy, To: addr.String(), Duration: dur, Rate: s.Rate, PacketBytes: s.PacketBytes,
		SndBuf: s.SndBuf, Seed: uint64(env.Index) + 1}
	st, serr := env.send(ctx, sendNS, g)
	rcv.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	count := <-done
	if serr != nil {
		return Result{}, serr
	}
	from, until := measured(s, dur)
	size := s.PacketBytes
	if size == 0 {
		size = 1400
	}
	sent := st.Bytes / int64(size)
	r := Result{Throughput: b.rate(from, until), Count: count, Stalls: st.Stalls}
	if sent > 0 {
		r.Loss = max(0, 1-float64(count)/float64(sent))
	}
	return r, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

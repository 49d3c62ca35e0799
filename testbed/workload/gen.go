package workload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/testbed/netns"
)

// udpPair opens the generator's sockets: the sender in the namespace the
// direction says, the receiver at the other end.
func udpPair(env Env, s Spec) (snd, rcv *net.UDPConn, err error) {
	cliNS, srvNS, cliAddr, srvAddr, err := env.ends(s)
	if err != nil {
		return nil, nil, err
	}
	sendNS, recvNS, recvAddr := cliNS, srvNS, srvAddr
	if s.Direction == "down" {
		sendNS, recvNS, recvAddr = srvNS, cliNS, cliAddr
	}
	to := &net.UDPAddr{IP: recvAddr.AsSlice(), Port: env.port(s)}
	if err := netns.Do(recvNS, func() (err error) { rcv, err = net.ListenUDP("udp4", to); return err }); err != nil {
		return nil, nil, fmt.Errorf("listen %v: %w", to, err)
	}
	if err := netns.Do(sendNS, func() (err error) { snd, err = net.DialUDP("udp4", nil, to); return err }); err != nil {
		rcv.Close()
		return nil, nil, fmt.Errorf("dial %v: %w", to, err)
	}
	rcv.SetReadBuffer(4 << 20)
	return snd, rcv, nil
}

// paced calls send(i) at start+i*iv for i in [0, n) from a locked thread
// that sleeps on the monotonic clock, and returns the send times.
func paced(ctx context.Context, n int, iv time.Duration, send func(i int) error) ([]time.Time, error) {
	type out struct {
		at  []time.Time
		err error
	}
	ch := make(chan out, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		at := make([]time.Time, 0, n)
		start := time.Now()
		for i := 0; i < n && ctx.Err() == nil; i++ {
			sleepUntil(start.Add(time.Duration(i) * iv))
			at = append(at, time.Now())
			if err := send(i); err != nil {
				ch <- out{at, err}
				return
			}
		}
		ch <- out{at, ctx.Err()}
	}()
	o := <-ch
	return o.at, o.err
}

type arrival struct {
	seq, part uint32
	at        time.Time
	size      int
}

// The generators' datagrams start with a header: sequence number, part
// (video) and the run's token, big endian, 4 bytes each. The token tells
// this run's datagrams from late ones of an earlier workload that used
// the same port (an iperf3 UDP flow still queued in the emulated link).
const headerBytes = 12

// putHeader writes the header into msg.
func putHeader(msg []byte, seq, part, token uint32) {
	binary.BigEndian.PutUint32(msg, seq)
	binary.BigEndian.PutUint32(msg[4:], part)
	binary.BigEndian.PutUint32(msg[8:], token)
}

// receive reads datagrams until stop is closed and the socket has been
// quiet for a moment, and returns those of the run with this token.
func receive(rcv *net.UDPConn, capacity int, quiet time.Duration, stop <-chan struct{}, token uint32) []arrival {
	rs := make([]arrival, 0, capacity)
	buf := make([]byte, 65536)
	for {
		rcv.SetReadDeadline(time.Now().Add(quiet))
		n, err := rcv.Read(buf)
		if err != nil {
			select {
			case <-stop:
				return rs
			default:
				continue
			}
		}
		if n >= headerBytes && binary.BigEndian.Uint32(buf[8:]) == token {
			rs = append(rs, arrival{binary.BigEndian.Uint32(buf), binary.BigEndian.Uint32(buf[4:]), time.Now(), n})
		}
	}
}

func runAudio(ctx context.Context, env Env, s Spec, dur time.Duration) (Result, error) {
	if err := noWrap(env, s); err != nil {
		return Result{}, err
	}
	iv, size := s.Interval, s.PacketBytes
	if iv == 0 {
		iv = 20 * time.Millisecond
	}
	if size == 0 {
		size = 80
	}
	snd, rcv, err := udpPair(env, s)
	if err != nil {
		return Result{}, err
	}
	defer snd.Close()
	defer rcv.Close()
	n := int(dur / iv)
	token := rand.Uint32()
	stop := make(chan struct{})
	got := make(chan []arrival, 1)
	go func() { got <- receive(rcv, n, 500*time.Millisecond, stop, token) }()
	msg := make([]byte, size)
	sent, err := paced(ctx, n, iv, func(i int) error {
		putHeader(msg, uint32(i), 0, token)
		_, err := snd.Write(msg)
		return err
	})
	close(stop)
	rs := <-got
	if err != nil {
		return Result{}, err
	}
	// Each datagram once (the path may duplicate one), and only those sent.
	seen := make(map[uint32]bool, len(rs))
	rs = slices.DeleteFunc(rs, func(r arrival) bool {
		dup := seen[r.seq] || int(r.seq) >= len(sent)
		seen[r.seq] = true
		return dup
	})
	var lat, rgaps, sgaps []time.Duration
	for i := 1; i < len(sent); i++ {
		sgaps = append(sgaps, sent[i].Sub(sent[i-1]))
	}
	for i, r := range rs {
		if int(r.seq) < len(sent) {
			lat = append(lat, r.at.Sub(sent[r.seq]))
		}
		if i > 0 && r.seq == rs[i-1].seq+1 {
			rgaps = append(rgaps, r.at.Sub(rs[i-1].at))
		}
	}
	return Result{
		Throughput: float64(len(rs)*size*8) / dur.Seconds(),
		LatencyP50: percentile(lat, 0.5), LatencyP99: percentile(lat, 0.99),
		Loss:   1 - float64(len(rs))/float64(max(1, len(sent))),
		Jitter: absDevSD(rgaps, iv), SendJitter: absDevSD(sgaps, iv),
		Count: len(rs),
	}, nil
}

// videoChunk is the payload size of one datagram of a video frame.
const videoChunk = 1200

func runVideo(ctx context.Context, env Env, s Spec, dur time.Duration) (Result, error) {
	if err := noWrap(env, s); err != nil {
		return Result{}, err
	}
	snd, rcv, err := udpPair(env, s)
	if err != nil {
		return Result{}, err
	}
	defer snd.Close()
	defer rcv.Close()
	iv := time.Second / time.Duration(s.FPS)
	frames := int(dur / iv)
	parts := (s.FrameBytes + videoChunk - 1) / videoChunk
	stop := make(chan struct{})
	got := make(chan []arrival, 1)
	token := rand.Uint32()
	go func() { got <- receive(rcv, frames*parts, 500*time.Millisecond, stop, token) }()
	msg := make([]byte, videoChunk)
	sent, err := paced(ctx, frames, iv, func(i int) error {
		left := s.FrameBytes
		for p := 0; p < parts; p++ {
			sz := max(headerBytes, min(left, videoChunk))
			left -= sz
			putHeader(msg, uint32(i), uint32(p), token)
			if _, err := snd.Write(msg[:sz]); err != nil {
				return err
			}
		}
		return nil
	})
	close(stop)
	rs := <-got
	if err != nil {
		return Result{}, err
	}
	count := map[uint32]int{}
	var done []time.Time
	var lat []time.Duration
	bytes := 0
	for _, r := range rs {
		bytes += r.size
		count[r.seq]++
		if count[r.seq] == parts && int(r.seq) < len(sent) {
			done = append(done, r.at)
			lat = append(lat, r.at.Sub(sent[r.seq]))
		}
	}
	var gaps []time.Duration
	for i := 1; i < len(done); i++ {
		gaps = append(gaps, done[i].Sub(done[i-1]))
	}
	return Result{
		Throughput: float64(bytes*8) / dur.Seconds(),
		FPS:        float64(len(done)) / dur.Seconds(),
		LatencyP50: percentile(lat, 0.5), LatencyP99: percentile(lat, 0.99),
		Loss:   1 - float64(len(done))/float64(max(1, len(sent))),
		Jitter: absDevSD(gaps, iv), Count: len(done),
	}, nil
}

func runReqResp(ctx context.Context, env Env, s Spec, dur time.Duration) (Result, error) {
	if err := noWrap(env, s); err != nil {
		return Result{}, err
	}
	cliNS, srvNS, cliAddr, srvAddr, err := env.ends(s)
	if err != nil {
		return Result{}, err
	}
	// Responses go down (the requester in src) unless the direction is up.
	reqNS, respNS, respAddr := cliNS, srvNS, srvAddr
	if s.Direction == "up" {
		reqNS, respNS, respAddr = srvNS, cliNS, cliAddr
	}
	req, resp := s.ReqBytes, s.RespBytes
	if req == 0 {
		req = 100
	}
	if resp == 0 {
		resp = 1000
	}
	addr := &net.TCPAddr{IP: respAddr.AsSlice(), Port: env.port(s)}
	var ln *net.TCPListener
	if err := netns.Do(respNS, func() (err error) { ln, err = net.ListenTCP("tcp4", addr); return err }); err != nil {
		return Result{}, fmt.Errorf("listen %v: %w", addr, err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		in, out := make([]byte, req), make([]byte, resp)
		for {
			if _, err := io.ReadFull(c, in); err != nil {
				return
			}
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}()
	var conn net.Conn
	if err := netns.Do(reqNS, func() (err error) {
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err = d.DialContext(ctx, "tcp4", addr.String())
		return err
	}); err != nil {
		return Result{}, fmt.Errorf("dial %v: %w", addr, err)
	}
	defer conn.Close()
	rng := rand.New(rand.NewPCG(uint64(env.Index), 42))
	in, out := make([]byte, resp), make([]byte, req)
	var lat []time.Duration
	period, intensity := s.Period, s.Intensity
	if period <= 0 {
		period = DefaultPeriod
	}
	start := time.Now()
	end := start.Add(dur)
	conn.SetDeadline(end.Add(5 * time.Second))
	for now := start; now.Before(end) && ctx.Err() == nil; now = time.Now() {
		// At an intensity below 1, requests start only in the first
		// intensity·period of each period (seed 003's duty cycle).
		if intensity > 0 && intensity < 1 {
			if next, on := duty(start, now, period, intensity); !on {
				sleepUntil(next)
				continue
			}
		}
		t0 := time.Now()
		if _, err := conn.Write(out); err != nil {
			return Result{}, fmt.Errorf("request: %w", err)
		}
		if _, err := io.ReadFull(conn, in); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return Result{}, fmt.Errorf("response: %w", err)
		}
		lat = append(lat, time.Since(t0))
		think := s.Think
		if s.ThinkExp {
			think = time.Duration(rng.ExpFloat64() * float64(s.Think))
		}
		if think > 0 {
			sleepUntil(time.Now().Add(think))
		}
	}
	conn.Close()
	return Result{
		Throughput: float64(len(lat)*(req+resp)*8) / dur.Seconds(),
		LatencyP50: percentile(lat, 0.5), LatencyP99: percentile(lat, 0.99),
		Count: len(lat),
	}, nil
}

package ch5

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The video application's two ends. The sender encodes a frame every
// 1/FPS s at its current quality and sends it in datagrams of at most
// ChunkBytes; a frame whose slot passed while the previous one was still
// being encoded is skipped (a starved sender generates fewer frames). The
// receiver reassembles frames, decodes each complete one and checks it
// against the frame it should be (PSNR), in order, on one goroutine: a
// starved receiver displays fewer frames. Both print one JSON line per
// second of what they did (SenderSecond, ReceiverSecond).

// ChunkBytes is the largest datagram payload of a frame (header included).
const ChunkBytes = 1200

// A frame datagram's header (big-endian): magic 0xC5F0, frame number
// (32 bits), datagram index and count (16 bits each), and the sender's
// share of the frame interval spent encoding over its last second, in
// thousandths (16 bits), which the receiver puts in its reports.
const (
	chunkHeader = 12
	magicFrame  = 0xC5F0
	magicFeed   = 0xC5FB
)

// reportFrom is when a receiver starts reporting to lanesd, from time
// zero: the first second's rate is the start-up's (a cold decoder and
// encoder, 16-18 frames), which would move a controller before anything
// disturbs the video.
const reportFrom = 2 * time.Second

// TargetFPS is the frame rate the application is built for (the seed's
// vic experiment: 20 frames/s).
const TargetFPS = 20

// SenderConfig is what a sender process runs (`lanes bench ch5video send`).
type SenderConfig struct {
	To       string        `json:"to"` // receiver host:port
	Duration time.Duration `json:"duration"`
	FPS      int           `json:"fps,omitempty"`     // default TargetFPS
	Quality  int           `json:"quality,omitempty"` // initial, default MaxQuality
	// Adapt turns on the application's own adaptation from the
	// receiver's feedback (the "app" arm).
	Adapt bool `json:"adapt,omitempty"`
	// Socket is lanesd's socket: when set the sender obeys quality
	// directives (GET /v1/directives) and reports its quality.
	Socket string `json:"socket,omitempty"`
	// Start is the experiment's time zero (Unix ns): seconds are counted
	// from it.
	Start int64 `json:"start"`
}

// ReceiverConfig is what a receiver process runs (`lanes bench ch5video recv`).
type ReceiverConfig struct {
	Listen   string        `json:"listen"` // host:port
	Duration time.Duration `json:"duration"`
	FPS      int           `json:"fps,omitempty"`
	// Socket is lanesd's socket: when set the receiver reports fps,
	// jitter and its target range (POST /v1/report) every ReportEvery.
	Socket      string        `json:"socket,omitempty"`
	ReportEvery time.Duration `json:"report_every,omitempty"` // default 500ms
	FPSMin      float64       `json:"fps_min,omitempty"`      // default FPS-1
	FPSMax      float64       `json:"fps_max,omitempty"`      // default FPS+1
	// Directives: follow lanesd's directives to this process (GET
	// /v1/directives) and relay their quality to the sender.
	Directives bool  `json:"directives,omitempty"`
	Start      int64 `json:"start"`
}

// SenderSecond is one second of a sender.
type SenderSecond struct {
	T          int     `json:"t"` // seconds since Start
	Frames     int     `json:"frames"`
	Skipped    int     `json:"skipped"`    // frame slots missed
	Quality    float64 `json:"quality"`    // mean over the frames sent
	EncodeCPU  float64 `json:"encode_cpu"` // ms of thread CPU per frame
	EncodeWall float64 `json:"encode_ms"`  // ms of wall time per frame
	Bytes      int     `json:"bytes"`
	Directives int     `json:"directives,omitempty"`
	FeedFPS    float64 `json:"feedback_fps,omitempty"` // last feedback
}

// ReceiverSecond is one second of a receiver: what the user sees.
type ReceiverSecond struct {
	T         int     `json:"t"`
	Frames    int     `json:"frames"`    // frames displayed (decoded) in this second
	Jitter    float64 `json:"jitter_ms"` // mean |gap - 1/FPS| of the gaps ending in it
	MaxGap    float64 `json:"max_gap_ms"`
	Lost      int     `json:"lost"`       // frames incomplete (a datagram lost)
	Late      int     `json:"late"`       // complete frames dropped for a full decode queue
	Quality   float64 `json:"quality"`    // mean quality of the frames displayed
	PSNR      float64 `json:"psnr"`       // mean PSNR of the frames displayed
	DecodeCPU float64 `json:"decode_cpu"` // ms of thread CPU per frame
	Reports   int     `json:"reports,omitempty"`
	ReportErr string  `json:"report_error,omitempty"`
	// Directives is how many directives lanesd sent in this second.
	Directives int `json:"directives,omitempty"`
}

func (c *SenderConfig) validate() error {
	if c.FPS == 0 {
		c.FPS = TargetFPS
	}
	if c.Quality == 0 {
		c.Quality = MaxQuality
	}
	switch {
	case c.To == "":
		return errors.New("sender: to: empty (want host:port)")
	case c.Duration <= 0 || c.Duration > time.Hour:
		return fmt.Errorf("sender: duration %v: want (0, 1h]", c.Duration)
	case c.FPS < 1 || c.FPS > 120:
		return fmt.Errorf("sender: fps %d: want 1..120", c.FPS)
	case c.Quality < MinQuality || c.Quality > MaxQuality:
		return fmt.Errorf("sender: quality %d: want %d..%d", c.Quality, MinQuality, MaxQuality)
	}
	return nil
}

func (c *ReceiverConfig) validate() error {
	if c.FPS == 0 {
		c.FPS = TargetFPS
	}
	if c.ReportEvery == 0 {
		c.ReportEvery = 500 * time.Millisecond
	}
	if c.FPSMin == 0 && c.FPSMax == 0 {
		c.FPSMin, c.FPSMax = float64(c.FPS)-1, float64(c.FPS)+1
	}
	switch {
	case c.Listen == "":
		return errors.New("receiver: listen: empty (want host:port)")
	case c.Duration <= 0 || c.Duration > time.Hour:
		return fmt.Errorf("receiver: duration %v: want (0, 1h]", c.Duration)
	case c.FPS < 1 || c.FPS > 120:
		return fmt.Errorf("receiver: fps %d: want 1..120", c.FPS)
	case c.ReportEvery < 50*time.Millisecond:
		return fmt.Errorf("receiver: report_every %v: want >= 50ms", c.ReportEvery)
	case c.FPSMin > c.FPSMax:
		return fmt.Errorf("receiver: fps_min %v > fps_max %v", c.FPSMin, c.FPSMax)
	}
	return nil
}

// VideoMain is a video process's body: role "send" or "recv", arg its
// config as JSON; one JSON line per second goes to w.
func VideoMain(ctx context.Context, role, arg string, w io.Writer) error {
	dec := json.NewDecoder(strings.NewReader(arg))
	dec.DisallowUnknownFields()
	switch role {
	case "send":
		var c SenderConfig
		if err := dec.Decode(&c); err != nil {
			return fmt.Errorf("sender config: %w", err)
		}
		return RunSender(ctx, c, w)
	case "recv":
		var c ReceiverConfig
		if err := dec.Decode(&c); err != nil {
			return fmt.Errorf("receiver config: %w", err)
		}
		return RunReceiver(ctx, c, w)
	}
	return fmt.Errorf("video role %q: want send or recv", role)
}

// Adapt is the application's own adaptation (the "app" arm): from the
// receiver's frame rate over the last second and the busier end's share
// of the frame interval spent coding, the next quality. Below 19 frames/s
// the quality drops in proportion to the shortfall (at least 5); at 19.5
// or more with both ends busy less than 70 % of the frame interval it
// rises by 5; otherwise it stays.
func Adapt(q int, fps, busy float64) int {
	switch {
	case fps < TargetFPS-1:
		q = min(q-5, int(float64(q)*fps/TargetFPS))
	case fps >= TargetFPS-0.5 && busy < 0.7:
		q += 5
	}
	return max(MinQuality, min(MaxQuality, q))
}

// feedback is the receiver's datagram back to the sender, once a second
// and at once when lanesd directs a new quality: the frame rate the
// receiver displayed over the last second, the share of it spent decoding,
// and the quality lanesd's last directive asked for (0: none). lanesd
// addresses directives to the process that reported — the receiver, whose
// frame rate is the QoS the user sees — and the receiver relays them to
// the sender, the seed's end-to-end loop.
type feedback struct {
	fps, busy float64
	quality   int
}

func putFeedback(b []byte, f feedback) []byte {
	b = binary.BigEndian.AppendUint16(b[:0], magicFeed)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(f.fps))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(f.busy))
	return binary.BigEndian.AppendUint16(b, uint16(f.quality))
}

func parseFeedback(b []byte) (feedback, bool) {
	if len(b) != 20 || binary.BigEndian.Uint16(b) != magicFeed {
		return feedback{}, false
	}
	f := feedback{math.Float64frombits(binary.BigEndian.Uint64(b[2:])), math.Float64frombits(binary.BigEndian.Uint64(b[10:])),
		int(binary.BigEndian.Uint16(b[18:]))}
	if math.IsNaN(f.fps) || f.fps < 0 || f.fps > 1000 || math.IsNaN(f.busy) || f.busy < 0 || f.busy > 100 || f.quality > MaxQuality {
		return feedback{}, false
	}
	return f, true
}

// RunSender sends frames until the duration is over or ctx ends.
func RunSender(ctx context.Context, c SenderConfig, w io.Writer) error {
	if err := c.validate(); err != nil {
		return err
	}
	conn, err := net.Dial("udp", c.To)
	if err != nil {
		return fmt.Errorf("sender: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, c.Duration)
	defer cancel()
	start := startTime(c.Start)
	var quality atomic.Int64
	quality.Store(int64(c.Quality))
	var directives atomic.Int64
	var lastFeed atomic.Uint64 // float64 bits
	var busyFrac atomic.Uint64 // sender's own share of the interval, float64 bits

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if c.Socket != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			followDirectives(ctx, c.Socket, func(q int) {
				quality.Store(int64(max(MinQuality, min(MaxQuality, q))))
				directives.Add(1)
			})
		}()
	}
	// Feedback from the receiver, on the same socket.
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 64)
		for ctx.Err() == nil {
			conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := conn.Read(buf)
			if err != nil {
				continue // timeout, or ICMP unreachable before the receiver is up
			}
			f, ok := parseFeedback(buf[:n])
			if !ok {
				continue
			}
			lastFeed.Store(math.Float64bits(f.fps))
			if f.quality >= MinQuality && int64(f.quality) != quality.Load() {
				quality.Store(int64(f.quality)) // a directive relayed by the receiver
				directives.Add(1)
			}
			if c.Adapt {
				busy := max(f.busy, math.Float64frombits(busyFrac.Load()))
				q := int(quality.Load())
				quality.Store(int64(Adapt(q, f.fps, busy)))
			}
		}
	}()

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	iv := time.Second / time.Duration(c.FPS)
	enc := &Encoder{}
	var f Frame
	msg := make([]byte, ChunkBytes)
	enc0 := json.NewEncoder(w)
	var cur SenderSecond
	cur.T = -1
	var qsum, cpuSum, wallSum float64
	flush := func() {
		if cur.T < 0 {
			return
		}
		if cur.Frames > 0 {
			cur.Quality = qsum / float64(cur.Frames)
			cur.EncodeCPU = cpuSum / float64(cur.Frames)
			cur.EncodeWall = wallSum / float64(cur.Frames)
			busyFrac.Store(math.Float64bits(wallSum / float64(cur.Frames) / (float64(iv) / 1e6)))
		}
		cur.Directives = int(directives.Swap(0))
		cur.FeedFPS = math.Float64frombits(lastFeed.Load())
		enc0.Encode(cur)
		cur, qsum, cpuSum, wallSum = SenderSecond{}, 0, 0, 0
	}
	defer flush()
	t0 := time.Now()
	if start.After(t0) { // frames start at time zero
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(start.Sub(t0)):
		}
		t0 = start
	}
	slot := 0
	for seq := uint32(0); ; seq++ {
		due := t0.Add(time.Duration(slot) * iv)
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(d):
			}
		} else if ctx.Err() != nil {
			return nil
		}
		now := time.Now()
		sec := int(now.Sub(start) / time.Second)
		if sec != cur.T {
			flush()
			cur.T = sec
		}
		q := int(quality.Load())
		c0, w0 := threadCPU(), time.Now()
		Synthesize(&f, seq, q)
		data, err := enc.Encode(&f)
		if err != nil {
			return fmt.Errorf("sender: %w", err)
		}
		parts := (len(data) + ChunkBytes - chunkHeader - 1) / (ChunkBytes - chunkHeader)
		for p := 0; p < parts; p++ {
			lo := p * (ChunkBytes - chunkHeader)
			hi := min(len(data), lo+ChunkBytes-chunkHeader)
			binary.BigEndian.PutUint16(msg[0:], magicFrame)
			binary.BigEndian.PutUint32(msg[2:], seq)
			binary.BigEndian.PutUint16(msg[6:], uint16(p))
			binary.BigEndian.PutUint16(msg[8:], uint16(parts))
			binary.BigEndian.PutUint16(msg[10:], uint16(min(60000, 1000*math.Float64frombits(busyFrac.Load()))))
			n := copy(msg[chunkHeader:], data[lo:hi])
			if _, err := conn.Write(msg[:chunkHeader+n]); err != nil && !isTransient(err) {
				return fmt.Errorf("sender: send frame %d: %w", seq, err)
			}
		}
		cur.Frames++
		cur.Bytes += len(data)
		qsum += float64(q)
		cpuSum += float64(threadCPU()-c0) / 1e6
		wallSum += float64(time.Since(w0)) / 1e6
		// Next slot: the one after now; slots that passed are skipped.
		next := int(time.Since(t0)/iv) + 1
		cur.Skipped += max(0, next-slot-1)
		slot = max(slot+1, next)
	}
}

// isTransient tells errors a UDP sender lives with: a full device queue
// or an ICMP error from an earlier datagram.
func isTransient(err error) bool {
	s := err.Error()
	return strings.Contains(s, "no buffer space") || strings.Contains(s, "connection refused")
}

func startTime(ns int64) time.Time {
	if ns == 0 {
		return time.Now()
	}
	return time.Unix(0, ns)
}

type pending struct {
	parts int
	got   int
	have  []bool
	data  []byte
}

// RunReceiver receives, decodes and displays frames until the duration is
// over or ctx ends.
func RunReceiver(ctx context.Context, c ReceiverConfig, w io.Writer) error {
	if err := c.validate(); err != nil {
		return err
	}
	laddr, err := net.ResolveUDPAddr("udp", c.Listen)
	if err != nil {
		return fmt.Errorf("receiver: listen %q: %w", c.Listen, err)
	}
	conn, err := net.ListenUDP("udp", laddr)
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	defer conn.Close()
	conn.SetReadBuffer(4 << 20)
	ctx, cancel := context.WithTimeout(ctx, c.Duration)
	defer cancel()
	start := startTime(c.Start)
	iv := time.Second / time.Duration(c.FPS)

	queue := make(chan []byte, 4) // complete frames waiting to be decoded: 200 ms at 20 fps
	var late, lost atomic.Int64
	var directed, directives atomic.Int64 // lanesd's last quality directive, and how many came
	var senderBusy atomic.Uint64          // the sender's share of the frame interval spent encoding (float64 bits), from the frames' headers
	var peer atomic.Pointer[net.UDPAddr]

	var wg sync.WaitGroup
	// Reassembly.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(queue)
		frames := map[uint32]*pending{}
		var newest uint32
		buf := make([]byte, 65536)
		for ctx.Err() == nil {
			conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				continue
			}
			if n < chunkHeader || binary.BigEndian.Uint16(buf) != magicFrame {
				continue
			}
			peer.Store(from)
			senderBusy.Store(math.Float64bits(float64(binary.BigEndian.Uint16(buf[10:])) / 1000))
			seq := binary.BigEndian.Uint32(buf[2:])
			part := int(binary.BigEndian.Uint16(buf[6:]))
			parts := int(binary.BigEndian.Uint16(buf[8:]))
			if parts == 0 || part >= parts || parts > 1024 || seq+16 < newest {
				continue
			}
			if seq > newest {
				newest = seq
				for s, p := range frames { // older than 16 frames: a datagram was lost
					if s+16 < newest {
						delete(frames, s)
						if p.got < p.parts {
							lost.Add(1)
						}
					}
				}
			}
			p := frames[seq]
			if p == nil {
				p = &pending{parts: parts, have: make([]bool, parts), data: make([]byte, parts*(ChunkBytes-chunkHeader))}
				frames[seq] = p
			}
			if p.parts != parts || p.have[part] || p.got == p.parts {
				continue
			}
			p.have[part] = true
			p.got++
			copy(p.data[part*(ChunkBytes-chunkHeader):], buf[chunkHeader:n])
			if part == parts-1 {
				p.data = p.data[:part*(ChunkBytes-chunkHeader)+n-chunkHeader]
			}
			if p.got == p.parts {
				select {
				case queue <- p.data:
				default: // the decoder is behind: the oldest waiting frame is skipped
					select {
					case <-queue:
						late.Add(1)
					default:
					}
					select {
					case queue <- p.data:
					default:
						late.Add(1)
					}
				}
			}
		}
	}()

	// Per-second record and reports, shared with the decoder.
	var mu sync.Mutex
	var cur ReceiverSecond
	cur.T = -1
	var qsum, psum, csum float64
	var shown []time.Time // display times of the last second, for fps
	var reports int
	var reportErr string
	enc := json.NewEncoder(w)
	flush := func() { // mu held
		if cur.T < 0 {
			return
		}
		if cur.Frames > 0 {
			cur.Quality = qsum / float64(cur.Frames)
			cur.PSNR = psum / float64(cur.Frames)
			cur.DecodeCPU = csum / float64(cur.Frames)
			cur.Jitter /= float64(cur.Frames)
		}
		cur.Lost = int(lost.Swap(0))
		cur.Late = int(late.Swap(0))
		cur.Reports, cur.ReportErr = reports, reportErr
		cur.Directives = int(directives.Swap(0))
		reports, reportErr = 0, ""
		enc.Encode(cur)
		cur, qsum, psum, csum = ReceiverSecond{}, 0, 0, 0
	}
	roll := func(now time.Time) { // mu held
		sec := int(now.Sub(start) / time.Second)
		if cur.T < 0 {
			cur.T = sec
			return
		}
		for cur.T < sec {
			t := cur.T
			flush()
			cur.T = t + 1
		}
	}
	rate := func(now time.Time) float64 { // mu held: frames shown in the last second
		for len(shown) > 0 && now.Sub(shown[0]) > time.Second {
			shown = shown[1:]
		}
		return float64(len(shown))
	}
	busyWin := struct {
		sync.Mutex
		wall time.Duration
	}{}

	// Directives from lanesd, relayed to the sender.
	kick := make(chan struct{}, 1)
	if c.Directives && c.Socket != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			followDirectives(ctx, c.Socket, func(q int) {
				directed.Store(int64(max(MinQuality, min(MaxQuality, q))))
				directives.Add(1)
				select {
				case kick <- struct{}{}:
				default:
				}
			})
		}()
	}
	sendFeedback := func(fps, busy float64) {
		if to := peer.Load(); to != nil {
			conn.WriteToUDP(putFeedback(nil, feedback{fps, busy, int(directed.Load())}), to)
		}
	}

	// Feedback to the sender and reports to lanesd.
	wg.Add(1)
	go func() {
		defer wg.Done()
		var rep *reporter
		if c.Socket != "" {
			rep = newReporter(c.Socket)
		}
		tick := time.NewTicker(min(c.ReportEvery, time.Second))
		defer tick.Stop()
		lastFeed := time.Now()
		lastBusy := 0.0
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				mu.Lock()
				fps := rate(time.Now())
				mu.Unlock()
				sendFeedback(fps, lastBusy)
			case now := <-tick.C:
				mu.Lock()
				roll(now)
				fps := rate(now)
				jit := cur.Jitter / max(1, float64(cur.Frames))
				q := qsum / max(1, float64(cur.Frames))
				mu.Unlock()
				if now.Sub(lastFeed) >= time.Second-10*time.Millisecond {
					busyWin.Lock()
					busy := float64(busyWin.wall) / float64(now.Sub(lastFeed))
					busyWin.wall = 0
					busyWin.Unlock()
					lastFeed, lastBusy = now, busy
					sendFeedback(fps, busy)
				}
				if rep != nil && now.Sub(start) >= reportFrom { // past the start-up
					busy := max(lastBusy, math.Float64frombits(senderBusy.Load()))
					err := rep.report(ctx, map[string]float64{"fps": fps, "jitter_ms": jit, "quality": q, "busy": busy},
						map[string][2]float64{"fps": {c.FPSMin, c.FPSMax}})
					mu.Lock()
					if err != nil {
						reportErr = err.Error()
					} else {
						reports++
					}
					mu.Unlock()
				}
			}
		}
	}()

	// The decoder: this goroutine, on a locked thread (CPU time per frame).
	runtime.LockOSThread()
	var dec Decoder
	var f, ref Frame
	var last time.Time
	for data := range queue {
		c0, w0 := threadCPU(), time.Now()
		if err := dec.Decode(data, &f); err != nil {
			continue // a corrupt frame is not displayed
		}
		Synthesize(&ref, f.Seq, f.Quality)
		psnr := PSNR(ref.Pix, f.Pix)
		now := time.Now()
		busyWin.Lock()
		busyWin.wall += now.Sub(w0)
		busyWin.Unlock()
		mu.Lock()
		roll(now)
		cur.Frames++
		qsum += float64(f.Quality)
		psum += psnr
		csum += float64(threadCPU()-c0) / 1e6
		if !last.IsZero() {
			gap := now.Sub(last)
			cur.Jitter += math.Abs(float64(gap-iv)) / 1e6
			cur.MaxGap = max(cur.MaxGap, float64(gap)/1e6)
		}
		shown = append(shown, now)
		mu.Unlock()
		last = now
	}
	runtime.UnlockOSThread()
	cancel()
	wg.Wait()
	mu.Lock()
	flush()
	mu.Unlock()
	return nil
}

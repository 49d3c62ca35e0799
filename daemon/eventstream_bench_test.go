package daemon

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// TestEventStreamBench measures the event streams with the publisher
// inside the daemon, as a monitor is: a child process (this test binary)
// serves the daemon's API handler with its bus, history writer and a
// paced publisher of proc.exec events (a storm's topic), and this process
// streams them as clients do. It reports publish-to-receipt latency with
// 1, 10 and 100 clients, and the child's utime+stime at 10k events/s with
// no stream and with one (docs/BENCHMARKS.md). A benchmark, not a test:
//
//	LANES_BENCH_EVENTSTREAM=1 go test ./daemon -run TestEventStreamBench -v
//
// LANES_BENCH_ONLY=cpu runs only the CPU part; LANES_BENCH_FLUSH the
// streams' flush intervals it compares (default 0,2ms,5ms,20ms).
func TestEventStreamBench(t *testing.T) {
	if os.Getenv("LANES_EVENTSTREAM_SERVER") != "" {
		benchServer(t)
		return
	}
	if os.Getenv("LANES_BENCH_EVENTSTREAM") == "" {
		t.Skip("a benchmark: set LANES_BENCH_EVENTSTREAM=1")
	}
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}
	latRate, _ := strconv.Atoi(envOr("LANES_BENCH_RATE", "1000"))
	cpuRate, _ := strconv.Atoi(envOr("LANES_BENCH_CPU_RATE", "10000"))
	dur, _ := time.ParseDuration(envOr("LANES_BENCH_DURATION", "5s"))
	t.Logf("load %s at start", load())
	t.Logf("| clients | rate | received (all clients) | dropped | p50 | p99 | max |")
	only := os.Getenv("LANES_BENCH_ONLY")
	for _, c := range []int{1, 10, 100} {
		if only == "cpu" {
			break
		}
		r := benchRun(t, latRate, c, dur, 0)
		t.Logf("| %d | %d/s | %d | %d | %s | %s | %s |", c, latRate, r.received, r.dropped, usec(r.p50), usec(r.p99), usec(r.max))
	}
	for _, c := range []int{1, 10} {
		if only == "cpu" {
			break
		}
		r := benchRun(t, cpuRate, c, dur, 0)
		t.Logf("| %d | %d/s | %d | %d | %s | %s | %s |", c, cpuRate, r.received, r.dropped, usec(r.p50), usec(r.p99), usec(r.max))
	}
	t.Logf("daemon CPU (utime+stime) at %d events/s, %s each, load %s:", cpuRate, dur, load())
	t.Logf("| flush | daemon, no stream | daemon, one stream | added by the stream | stream p50 | p99 |")
	for range 2 {
		base := benchRun(t, cpuRate, 0, dur, 0)
		raw := benchRun(t, cpuRate, 1, dur, -1)
		t.Logf("| floor: one write a tick, no stream | %.1f %% | %.1f %% | **+%.1f %%** | | |", 100*base.cpu, 100*raw.cpu, 100*(raw.cpu-base.cpu))
	}
	for _, f := range strings.Split(envOr("LANES_BENCH_FLUSH", "0,2ms,5ms,20ms"), ",") {
		flush, err := time.ParseDuration(f)
		if err != nil {
			t.Fatalf("LANES_BENCH_FLUSH: %v", err)
		}
		for range 2 {
			base := benchRun(t, cpuRate, 0, dur, 0)
			one := benchRun(t, cpuRate, 1, dur, flush)
			t.Logf("| %v | %.1f %% | %.1f %% | **+%.1f %%** | %s | %s |", flush, 100*base.cpu, 100*one.cpu,
				100*(one.cpu-base.cpu), usec(one.p50), usec(one.p99))
		}
	}
	t.Logf("load %s at end", load())
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func usec(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }

type benchResult struct {
	received, dropped int
	p50, p99, max     time.Duration
	cpu               float64 // the server's CPU, a fraction of one
}

// benchRun starts a server publishing at rate, streams with clients (each
// with the flush interval given) for dur, and measures. A negative flush
// is the raw floor instead: the publisher's bytes written to one socket at
// each tick (LANES_BENCH_RAW).
func benchRun(t *testing.T, rate, clients int, dur, flush time.Duration) benchResult {
	dir := t.TempDir()
	sock := filepath.Join(dir, "lanes.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestEventStreamBench$")
	cmd.Env = append(os.Environ(), "LANES_EVENTSTREAM_SERVER="+sock, "LANES_BENCH_RATE="+strconv.Itoa(rate), "LANES_BENCH_DIR="+dir)
	if flush < 0 {
		cmd.Env = append(cmd.Env, "LANES_BENCH_RAW=1")
	}
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "READY" {
	}
	go func() {
		for sc.Scan() {
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type got struct {
		lat     []time.Duration
		dropped int
	}
	results := make([]got, clients)
	var from atomic.Int64 // events published before are not measured
	from.Store(math.MaxInt64)
	var wg sync.WaitGroup
	if flush < 0 {
		// The raw floor: one reader of the bytes, measuring nothing.
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go io.Copy(io.Discard, c)
		clients = 0
	}
	for i := 0; i < clients; i++ {
		s, err := client.New(sock).Events(ctx, client.EventsQuery{Topics: []string{"proc.>"}, Follow: true, Flush: flush})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(r *got) {
			defer wg.Done()
			defer s.Close()
			for {
				ev, err := s.Next()
				if err != nil {
					return
				}
				now := time.Now()
				if ev.Topic == api.TopicDropped {
					r.dropped += int(ev.Payload["dropped"].(float64))
					continue
				}
				if ev.Time.UnixNano() >= from.Load() {
					r.lat = append(r.lat, now.Sub(ev.Time))
				}
			}
		}(&results[i])
	}
	time.Sleep(500 * time.Millisecond) // settle
	before := procCPU(t, cmd.Process.Pid)
	start := time.Now()
	from.Store(start.UnixNano())
	time.Sleep(dur)
	cpu := (procCPU(t, cmd.Process.Pid) - before).Seconds() / time.Since(start).Seconds()
	time.Sleep(100 * time.Millisecond) // the last events arrive
	cancel()
	wg.Wait()
	var all []time.Duration
	r := benchResult{cpu: cpu}
	for _, g := range results {
		all = append(all, g.lat...)
		r.dropped += g.dropped
	}
	r.received = len(all)
	if len(all) > 0 {
		slices.Sort(all)
		r.p50, r.p99, r.max = all[len(all)/2], all[len(all)*99/100], all[len(all)-1]
	}
	return r
}

func procCPU(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond // USER_HZ 100
}

// benchServer is the child: the daemon's handler, bus and history writer
// (default [events] settings), and a publisher at LANES_BENCH_RATE.
func benchServer(t *testing.T) {
	sock := os.Getenv("LANES_EVENTSTREAM_SERVER")
	rate, _ := strconv.Atoi(os.Getenv("LANES_BENCH_RATE"))
	st, err := state.Open(filepath.Join(os.Getenv("LANES_BENCH_DIR"), "state"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := lane.Default()
	d := &Daemon{logf: func(string, ...any) {}, cfg: cfg, store: st, bus: events.New()}
	if d.ev, err = d.startEvents(cfg); err != nil {
		t.Fatal(err)
	}
	ln, err := listen(sock, -1)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("LANES_BENCH_RAW") == "" {
		go (&http.Server{Handler: d.handler(), ConnContext: connContext}).Serve(ln)
	}
	if f := os.Getenv("LANES_BENCH_CPUPROFILE"); f != "" {
		w, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		pprof.StartCPUProfile(w)
		go func() {
			time.Sleep(5 * time.Second)
			pprof.StopCPUProfile()
			w.Close()
		}()
	}
	// The platform's floor (LANES_BENCH_RAW): the same publisher, and the
	// bytes its events make on a stream written straight to one accepted
	// connection at each tick, as one write, with no bus, encoding or
	// HTTP: what a write and the reader's wake-up cost here.
	var raw net.Conn
	var line []byte
	if os.Getenv("LANES_BENCH_RAW") != "" {
		line = appendEventJSON(nil, &events.Event{Seq: 123456, Time: time.Now(), Source: "monitor/proc", Topic: "proc.exec",
			Payload: map[string]any{"pid": int64(123456), "ppid": int64(1)}})
		line = append(line, '\n')
		go func() {
			c, err := ln.Accept()
			if err == nil {
				raw = c
			}
		}()
	}
	fmt.Println("READY")
	// As a monitor would: the events of each millisecond at its tick.
	tick := time.NewTicker(time.Millisecond)
	start := time.Now()
	n := 0
	var buf []byte
	for now := range tick.C {
		buf = buf[:0]
		for due := int(float64(rate) * now.Sub(start).Seconds()); n < due; n++ {
			d.bus.Publish(events.Event{Source: "monitor/proc", Topic: "proc.exec",
				Payload: map[string]any{"pid": int64(100000 + n%1000), "ppid": int64(1)}})
			buf = append(buf, line...)
		}
		if c := raw; c != nil && len(buf) > 0 {
			c.Write(buf)
		}
		if now.Sub(start) > 10*time.Minute {
			return
		}
	}
}

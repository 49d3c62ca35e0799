// Command eventstream measures lanesd's event streams over the local API
// (GET /v1/events): how long an event takes from the daemon's Publish to a
// streaming client (p50, p99, max) with 1, 10 and 100 clients, how many
// events a second one stream carries, and what one stream adds to lanesd's
// CPU time at 10k events/s.
//
// It runs a real lanesd (built from this tree, as root, with its socket and
// state in a temporary directory) and publishes by posting application
// QoS reports (POST /v1/report) from this process: each becomes an event
// app.<pid>.report that the streams (topic app.>) carry. The event's time
// is set by the daemon's Publish; a client's latency is its receipt time
// minus that. lanesd's CPU is its utime+stime from /proc/<pid>/stat over
// a paced run, with no stream and with one: the difference is the
// stream's cost (the reports' own cost is in both).
//
//	go build -o /tmp/lanesd ./cmd/lanesd
//	flock /run/lanes-testbed.lock go run ./bench/eventstream --lanesd /tmp/lanesd
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
)

func main() {
	lanesd := flag.String("lanesd", "", "the lanesd binary to run (go build -o /tmp/lanesd ./cmd/lanesd)")
	clientsFlag := flag.String("clients", "1,10,100", "streaming client counts, comma-separated")
	rate := flag.Int("rate", 1000, "events per second in the latency runs")
	dur := flag.Duration("duration", 5*time.Second, "length of each latency run")
	cpuRate := flag.Int("cpu-rate", 10000, "events per second in the CPU runs")
	cpuDur := flag.Duration("cpu-duration", 10*time.Second, "length of each CPU run")
	workers := flag.Int("workers", 8, "concurrent report posters")
	flag.Parse()
	if *lanesd == "" {
		fail(errors.New("--lanesd is required (go build -o /tmp/lanesd ./cmd/lanesd)"))
	}
	var counts []int
	for _, f := range strings.Split(*clientsFlag, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 || c > 1000 {
			fail(fmt.Errorf("--clients: %q is not a count of 1..1000", f))
		}
		counts = append(counts, c)
	}
	if *rate < 1 || *cpuRate < 1 || *dur <= 0 || *cpuDur <= 0 || *workers < 1 {
		fail(errors.New("--rate, --cpu-rate, --duration, --cpu-duration and --workers must be positive"))
	}
	if os.Geteuid() != 0 {
		fail(errors.New("lanesd runs as root: run this as root (under flock /run/lanes-testbed.lock)"))
	}
	d, err := startDaemon(*lanesd)
	if err != nil {
		fail(err)
	}
	defer d.stop()
	p := newPoster(d.sock, *workers)
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}

	fmt.Printf("lanesd event streams over the local API (Unix socket), %d CPUs, load %s at start\n\n", runtime.NumCPU(), load())
	fmt.Printf("| clients | rate | events sent | received (all clients) | dropped | p50 | p99 | max |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range counts {
		r, err := latencyRun(d.sock, p, c, *rate, *dur)
		if err != nil {
			fail(err)
		}
		fmt.Printf("| %d | %d/s | %d | %d | %d | %s | %s | %s |\n", c, *rate, r.sent, r.received, r.dropped, us(r.p50), us(r.p99), us(r.max))
	}

	// Throughput: one stream, reports as fast as the posters go.
	r, err := latencyRun(d.sock, p, 1, 0, 3*time.Second)
	if err != nil {
		fail(err)
	}
	fmt.Printf("\nthroughput, one stream, unpaced: %.0f events/s published, %.0f/s received, %d dropped (p50 %s, p99 %s)\n",
		float64(r.sent)/r.elapsed.Seconds(), float64(r.received)/r.elapsed.Seconds(), r.dropped, us(r.p50), us(r.p99))

	// CPU: lanesd's utime+stime at cpuRate, no stream, then one.
	fmt.Printf("\nlanesd CPU at %d events/s (reports), %s each, load %s:\n", *cpuRate, *cpuDur, load())
	var base float64
	for _, c := range []int{0, 1} {
		before, err := cpuTime(d.cmd.Process.Pid)
		if err != nil {
			fail(err)
		}
		r, err := latencyRun(d.sock, p, c, *cpuRate, *cpuDur)
		if err != nil {
			fail(err)
		}
		after, _ := cpuTime(d.cmd.Process.Pid)
		frac := (after - before).Seconds() / r.elapsed.Seconds()
		if c == 0 {
			base = frac
		}
		fmt.Printf("  %d stream(s): %.0f events/s sent, %d received, lanesd %.1f %% of one CPU", c, float64(r.sent)/r.elapsed.Seconds(), r.received, 100*frac)
		if c > 0 {
			fmt.Printf(" (%+.1f %% for the stream)", 100*(frac-base))
		}
		fmt.Println()
	}
	fmt.Printf("\nload at end %s\n", load())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "eventstream:", err)
	os.Exit(1)
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }

type daemon struct {
	cmd  *exec.Cmd
	dir  string
	sock string
}

// startDaemon runs lanesd with its socket and state in a new directory
// and the embedded defaults (an empty config file: no network shaping).
func startDaemon(bin string) (*daemon, error) {
	dir, err := os.MkdirTemp("", "lanes-eventstream-")
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "lanes.toml")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		return nil, err
	}
	d := &daemon{dir: dir, sock: filepath.Join(dir, "lanes.sock")}
	d.cmd = exec.Command(bin, "--config", cfg, "--socket", d.sock, "--state-dir", filepath.Join(dir, "state"))
	d.cmd.Stderr = os.Stderr
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start lanesd: %w", err)
	}
	c := client.New(d.sock)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c.Alive(context.Background()) {
			return d, nil
		}
	}
	d.stop()
	return nil, errors.New("lanesd did not answer within 30 s")
}

func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(d.dir)
}

// cpuTime is a process's utime+stime.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	// Fields after the comm: state is [0]; utime and stime are stat's 14
	// and 15, here [11] and [12], in clock ticks (USER_HZ = 100).
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond, nil
}

// poster posts reports over keep-alive connections.
type poster struct {
	hc      *http.Client
	workers int
	body    []byte
}

func newPoster(sock string, workers int) *poster {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: workers,
	}
	body, _ := json.Marshal(api.ReportRequest{Metrics: map[string]float64{"fps": 24, "latency_ms": 12.5}})
	return &poster{hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}, workers: workers, body: body}
}

func (p *poster) post() error {
	resp, err := p.hc.Post("http://lanesd"+api.RouteReport, "application/json", bytes.NewReader(p.body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var b [512]byte
	for {
		if _, err := resp.Body.Read(b[:]); err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", api.RouteReport, resp.Status)
	}
	return nil
}

// run posts reports at rate (0: as fast as the workers go) for dur, and
// returns how many were posted and the time it took.
func (p *poster) run(rate int, dur time.Duration) (int, time.Duration, error) {
	tokens := make(chan struct{}, 4096)
	var sent atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(dur)
	for w := 0; w < p.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if rate > 0 {
					if _, ok := <-tokens; !ok {
						return
					}
				} else if time.Now().After(stop) {
					return
				}
				if err := p.post(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				sent.Add(1)
			}
		}()
	}
	if rate > 0 {
		// Tokens every millisecond, as many as the rate has accrued.
		t := time.NewTicker(time.Millisecond)
		issued := 0
		for now := range t.C {
			if now.After(stop) {
				break
			}
			due := int(float64(rate) * now.Sub(start).Seconds())
			for ; issued < due; issued++ {
				select {
				case tokens <- struct{}{}:
				default: // the posters are behind: the run says so in its count
				}
			}
		}
		t.Stop()
		close(tokens)
	}
	wg.Wait()
	if e, ok := firstErr.Load().(error); ok {
		return int(sent.Load()), time.Since(start), e
	}
	return int(sent.Load()), time.Since(start), nil
}

type result struct {
	sent, received, dropped int
	elapsed                 time.Duration
	p50, p99, max           time.Duration
}

// latencyRun opens clients streams of app.>, posts at rate for dur, and
// collects every client's publish-to-receipt latencies.
func latencyRun(sock string, p *poster, clients, rate int, dur time.Duration) (result, error) {
	var res result
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type got struct {
		lat     []time.Duration
		dropped int
	}
	results := make([]got, clients)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		s, err := client.New(sock).Events(ctx, client.EventsQuery{Topics: []string{"app.>"}, Follow: true})
		if err != nil {
			return res, fmt.Errorf("stream %d: %w", i, err)
		}
		wg.Add(1)
		go func(i int, s *client.Stream) {
			defer wg.Done()
			defer s.Close()
			r := &results[i]
			r.lat = make([]time.Duration, 0, 1<<16)
			for {
				ev, err := s.Next()
				if err != nil {
					return
				}
				now := time.Now()
				if ev.Topic == api.TopicDropped {
					if n, ok := ev.Payload["dropped"].(float64); ok {
						r.dropped += int(n)
					}
					continue
				}
				r.lat = append(r.lat, now.Sub(ev.Time))
			}
		}(i, s)
	}
	time.Sleep(200 * time.Millisecond) // every stream subscribed
	sent, elapsed, err := p.run(rate, dur)
	time.Sleep(500 * time.Millisecond) // the last events arrive
	cancel()
	wg.Wait()
	if err != nil {
		return res, err
	}
	var all []time.Duration
	for _, r := range results {
		all = append(all, r.lat...)
		res.dropped += r.dropped
	}
	res.sent, res.received, res.elapsed = sent, len(all), elapsed
	if len(all) > 0 {
		slices.Sort(all)
		res.p50, res.p99, res.max = all[len(all)/2], all[len(all)*99/100], all[len(all)-1]
	}
	return res, nil
}

package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/testbed/netns"
)

// command builds the client command in ns with env's wrapper.
func (e Env) command(ctx context.Context, ns string, argv ...string) *exec.Cmd {
	all := append(append([]string(nil), e.Wrap...), argv...)
	return netns.Command(ctx, ns, all[0], all[1:]...)
}

// server starts a server process in ns and returns a function that stops
// and reaps it.
func server(ctx context.Context, ns string, argv ...string) (func(), error) {
	cmd := netns.Command(ctx, ns, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	return func() {
		cmd.Process.Kill()
		cmd.Wait()
	}, nil
}

// iperfServer starts an iperf3 server (-1 -J) in ns. stop kills and
// reaps it; interrupt stops it with SIGINT, on which iperf3 still prints
// its JSON with the intervals it measured, and returns that output.
func iperfServer(ctx context.Context, ns string, argv ...string) (stop func(), interrupt func() []byte, err error) {
	cmd := netns.Command(ctx, ns, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stop = func() {
		cmd.Process.Kill()
		<-done
	}
	interrupt = func() []byte {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(iperfInterruptWait):
			cmd.Process.Kill()
			<-done
		}
		return stdout.Bytes()
	}
	return stop, interrupt, nil
}

// iperfInterruptWait is how long an interrupted iperf3 server has to
// print its output; the client is given up this much before the
// workload's deadline.
const iperfInterruptWait = 5 * time.Second

// within is the intervals that start before d (the client's -t span): an
// upload's receiver measures after it while the bottleneck's queue
// drains.
func (iv iperfIntervals) within(d time.Duration) iperfIntervals {
	var out iperfIntervals
	for _, i := range iv {
		if i.Sum.Start < d.Seconds() {
			out = append(out, i)
		}
	}
	return out
}

func seconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// stallInterval is iperf3's reporting interval: the resolution of
// Result.MaxStall.
const stallInterval = "0.1"

type iperfIntervals []struct {
	Sum struct {
		Start float64 `json:"start"`
		End   float64 `json:"end"`
		Bytes float64 `json:"bytes"`
	} `json:"sum"`
}

// stall is the longest run of consecutive intervals without a byte.
func (iv iperfIntervals) stall() time.Duration {
	var longest, run float64
	for _, i := range iv {
		if i.Sum.Bytes > 0 {
			run = 0
			continue
		}
		run += i.Sum.End - i.Sum.Start
		longest = max(longest, run)
	}
	return time.Duration(longest * float64(time.Second))
}

// rate is the throughput of the intervals that start at or after skip.
func (iv iperfIntervals) rate(skip time.Duration) (float64, bool) {
	var bytes, secs float64
	for _, i := range iv {
		if i.Sum.Start+0.01 < skip.Seconds() {
			continue
		}
		bytes += i.Sum.Bytes
		secs += i.Sum.End - i.Sum.Start
	}
	if secs < 0.5 {
		return 0, false
	}
	return bytes * 8 / secs, true
}

type iperfJSON struct {
	Error        string         `json:"error"`
	Intervals    iperfIntervals `json:"intervals"`
	ServerOutput *struct {
		Intervals iperfIntervals `json:"intervals"`
	} `json:"server_output_json"`
	End struct {
		SumSent *struct {
			Retransmits int `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived *struct {
			BitsPerSecond float64 `json:"bits_per_second"`
			LostPercent   float64 `json:"lost_percent"`
		} `json:"sum_received"`
		Sum *struct {
			BitsPerSecond float64 `json:"bits_per_second"`
			LostPercent   float64 `json:"lost_percent"`
			JitterMs      float64 `json:"jitter_ms"`
		} `json:"sum"`
	} `json:"end"`
}

func runIPerf3(ctx context.Context, env Env, s Spec, dur time.Duration) (Result, error) {
	cliNS, srvNS, _, srvAddr, err := env.ends(s)
	if err != nil {
		return Result{}, err
	}
	port := strconv.Itoa(env.port(s))
	// -J on the server too, so that --get-server-output returns JSON.
	// Intervals of stallInterval, at the receiver, give the longest stall.
	stop, interrupt, err := iperfServer(ctx, srvNS, "iperf3", "-s", "-1", "-J", "-i", stallInterval, "-B", srvAddr.String(), "-p", port)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	// The client is given up before the workload's deadline, so that an
	// upload's receiver (the server) can still report what it measured:
	// behind a link with seconds of queue and outages, the client's
	// closing exchange on its control connection can wait longer than
	// the deadline (S2 on the UMTS trace, without a shaper).
	cctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(ctx, dl.Add(-iperfInterruptWait))
		defer cancel()
	}
	argv := []string{"iperf3", "-J", "--get-server-output", "-i", stallInterval, "-c", srvAddr.String(), "-p", port, "-t", seconds(dur)}
	if s.CC != "" && s.Protocol != "udp" {
		argv = append(argv, "-C", s.CC)
	}
	if s.Protocol == "udp" {
		argv = append(argv, "-u", "-b", strconv.FormatUint(s.Rate, 10), "-l", "1400")
	}
	if s.Streams > 1 {
		argv = append(argv, "-P", strconv.Itoa(s.Streams))
	}
	if s.Direction == "down" {
		argv = append(argv, "-R")
	}
	if s.TOS != 0 {
		argv = append(argv, "-S", strconv.Itoa(s.TOS)) // the sender's data sockets, either end
	}
	var out []byte
	// The server needs a moment to listen; retry a refused connection.
	for attempt := 0; ; attempt++ {
		time.Sleep(200 * time.Millisecond)
		cmd := env.command(cctx, cliNS, argv...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err = cmd.Output()
		var res iperfJSON
		_ = json.Unmarshal(out, &res)
		if err == nil && res.Error == "" {
			break
		}
		msg := strings.TrimSpace(res.Error + " " + stderr.String())
		if attempt < 3 && strings.Contains(msg, "refused") && cctx.Err() == nil {
			continue
		}
		if cctx.Err() != nil && ctx.Err() == nil && s.Direction != "down" {
			// Killed in its closing exchange: the receiver's own
			// intervals over the run.
			var srv struct {
				Intervals iperfIntervals `json:"intervals"`
			}
			if json.Unmarshal(interrupt(), &srv) == nil {
				recv := srv.Intervals.within(dur)
				if bps, ok := recv.rate(s.Warmup); ok && recv[len(recv)-1].Sum.End >= dur.Seconds()-0.5 {
					r := Result{Throughput: bps}
					if s.Protocol != "udp" {
						r.MaxStall = recv.stall()
					}
					return r, nil
				}
			}
		}
		return Result{}, fmt.Errorf("iperf3 %s: %v: %s", strings.Join(argv[1:], " "), err, msg)
	}
	var res iperfJSON
	if err := json.Unmarshal(out, &res); err != nil {
		return Result{}, fmt.Errorf("parse iperf3 output: %w", err)
	}
	r := Result{}
	// Throughput at the receiver, per second: the server's intervals for
	// an upload, the client's for a download (-R).
	// An upload's receiver goes on after the client's span while the
	// bottleneck's queue drains (seconds behind a deep FIFO on a slow
	// link) and through the closing exchange: only the intervals that
	// start within the span count, as when the client is given up, so
	// that a phase measures the link over its own span whichever way it
	// ended (S2 on the UMTS trace read 1.02 Mbit/s for the foreground
	// alone over 23.6 s of intervals, the queue's drain at the trace's
	// later rates, and 1.31 over its first 15 s).
	recv := res.Intervals
	if s.Direction != "down" {
		recv = nil
		if res.ServerOutput != nil {
			recv = res.ServerOutput.Intervals.within(dur)
		}
	}
	if s.Protocol != "udp" {
		r.MaxStall = recv.stall()
		if res.End.SumSent != nil && s.Direction != "down" {
			r.Retransmits = res.End.SumSent.Retransmits
		}
	}
	bps, ok := recv.rate(s.Warmup)
	switch {
	case ok:
		r.Throughput = bps
	case s.Warmup > 0:
		return Result{}, errors.New("iperf3 output has no receiver intervals to leave the warmup out")
	case res.End.SumReceived != nil && res.End.SumReceived.BitsPerSecond > 0:
		r.Throughput = res.End.SumReceived.BitsPerSecond
	case res.End.Sum != nil:
		r.Throughput = res.End.Sum.BitsPerSecond * (1 - res.End.Sum.LostPercent/100)
	default:
		return Result{}, errors.New("iperf3 output has no summary")
	}
	if res.End.Sum != nil && s.Protocol == "udp" {
		r.Loss = res.End.Sum.LostPercent / 100
		r.Jitter = time.Duration(res.End.Sum.JitterMs * float64(time.Millisecond))
	}
	return r, nil
}

// IRTTDumpEnv names an environment variable: when it holds a directory,
// each irtt run's full JSON output (every round trip with its timestamps)
// is kept there as irtt-NAME-NANOS.json, for looking at latency over time
// rather than its percentiles.
const IRTTDumpEnv = "LANES_IRTT_DUMP"

func runIRTT(ctx context.Context, env Env, s Spec, dur time.Duration) (Result, error) {
	cliNS, srvNS, _, srvAddr, err := env.ends(s)
	if err != nil {
		return Result{}, err
	}
	addr := fmt.Sprintf("%s:%d", srvAddr, env.port(s))
	stop, err := server(ctx, srvNS, "irtt", "server", "-b", addr, "-i", "0", "-d", "0", "-l", "0")
	if err != nil {
		return Result{}, err
	}
	defer stop()
	iv := s.Interval
	if iv == 0 {
		iv = 10 * time.Millisecond
	}
	length := s.PacketBytes
	if length == 0 {
		length = 64
	}
	argv := []string{"irtt", "client", "-Q", "-o", "-", "-i", iv.String(), "-d", dur.String(),
		"-l", strconv.Itoa(length), "--wait=2s", "--timeouts=1s,2s,3s", addr}
	var out []byte
	for attempt := 0; ; attempt++ {
		time.Sleep(200 * time.Millisecond)
		cmd := env.command(ctx, cliNS, argv...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err = cmd.Output()
		if err == nil {
			break
		}
		if attempt < 3 && ctx.Err() == nil {
			continue
		}
		return Result{}, fmt.Errorf("irtt client: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	if d := os.Getenv(IRTTDumpEnv); d != "" {
		f := filepath.Join(d, fmt.Sprintf("irtt-%s-%d.json", s.Name, time.Now().UnixNano()))
		if err := os.WriteFile(f, out, 0o644); err != nil {
			env.logf("%s: keep irtt's output: %v", IRTTDumpEnv, err)
		} else {
			env.logf("irtt's per-packet output: %s", f)
		}
	}
	var res struct {
		RoundTrips []struct {
			Lost  string `json:"lost"`
			Delay struct {
				RTT int64 `json:"rtt"`
			} `json:"delay"`
		} `json:"round_trips"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return Result{}, fmt.Errorf("parse irtt output: %w", err)
	}
	var rtts []time.Duration
	lost := 0
	for _, rt := range res.RoundTrips {
		if rt.Lost != "false" {
			lost++
			continue
		}
		rtts = append(rtts, time.Duration(rt.Delay.RTT))
	}
	if len(rtts) == 0 {
		return Result{}, errors.New("irtt: no round trip completed")
	}
	return Result{
		LatencyP50: percentile(rtts, 0.5), LatencyP99: percentile(rtts, 0.99),
		Loss: float64(lost) / float64(len(res.RoundTrips)), Count: len(rtts),
	}, nil
}

func runFio(ctx context.Context, env Env, s Spec, dur time.Duration) (Result, error) {
	argv := append([]string{"fio", "--output-format=json", "--time_based", "--runtime=" + seconds(dur)}, s.Args...)
	cmd := env.command(ctx, env.Topo.Src, argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Result{}, fmt.Errorf("fio: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	// fio may print notes before the JSON object.
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	var res struct {
		Jobs []struct {
			Read struct {
				BwBytes float64 `json:"bw_bytes"`
			} `json:"read"`
			Write struct {
				BwBytes float64 `json:"bw_bytes"`
			} `json:"write"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return Result{}, fmt.Errorf("parse fio output: %w", err)
	}
	var bw float64
	for _, j := range res.Jobs {
		bw += j.Read.BwBytes + j.Write.BwBytes
	}
	return Result{Throughput: bw * 8}, nil
}

var bogoRE = regexp.MustCompile(`bogo-ops-per-second-real-time:\s*([0-9.eE+-]+)`)

func runStressNG(ctx context.Context, env Env, s Spec, dur time.Duration) (Result, error) {
	f, err := os.CreateTemp("", "lanes-stress-*.yaml")
	if err != nil {
		return Result{}, fmt.Errorf("stress-ng metrics file: %w", err)
	}
	f.Close()
	defer os.Remove(f.Name())
	argv := append([]string{"stress-ng", "--timeout", seconds(dur) + "s", "--metrics-brief", "--yaml", f.Name()}, s.Args...)
	cmd := env.command(ctx, env.Topo.Src, argv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return Result{}, fmt.Errorf("stress-ng: %v: %s", err, strings.TrimSpace(string(out)))
	}
	y, err := os.ReadFile(f.Name())
	if err != nil {
		return Result{}, fmt.Errorf("read stress-ng metrics: %w", err)
	}
	var ops float64
	for _, m := range bogoRE.FindAllSubmatch(y, -1) {
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		ops += v
	}
	return Result{Throughput: ops}, nil
}

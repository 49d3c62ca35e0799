package autorate

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/testbed/linkem"
)

// shapedRun replays the first span of a trace through the link
// emulator's model (a 500-packet FIFO served at the trace's delivery
// opportunities) behind a sender at rate(at) bits/s, with a 64-byte probe
// every 10 ms, and returns the probes' queueing delay at p99 and the share
// of the trace's capacity in the span that the link delivered, and the
// probes' p99 from lateStart on.
func shapedRun(trace *linkem.Trace, span time.Duration, rate func(at time.Duration) float64) (time.Duration, float64, time.Duration) {
	const pkt, probe = linkem.TraceMTU, 64
	l := linkem.NewModel(linkem.Config{Trace: trace, QueuePackets: 500})
	var delays, late []time.Duration
	var got, credit float64
	for at := time.Duration(0); at < span; at += time.Millisecond {
		credit += rate(at) / 1000
		for ; credit >= pkt*8; credit -= pkt * 8 {
			if v, fin := l.Arrive(at, pkt); v == linkem.Accepted && fin < span {
				got += pkt * 8
			}
		}
		if at%(10*time.Millisecond) == 0 {
			if v, fin := l.Arrive(at, probe); v == linkem.Accepted {
				delays = append(delays, fin-at)
				if at >= lateStart {
					late = append(late, fin-at)
				}
			}
		}
	}
	slices.Sort(delays)
	slices.Sort(late)
	return delays[len(delays)*99/100], got / trace.Capacity(0, span), late[len(late)*99/100]
}

// What any shaper that follows the link could reach on the shared
// traces, on the same model as TestTraceLink: shapers told the trace's
// own capacity, a share of it, per window — the window's own (foresight:
// no estimator has it) or the window before (a perfect measurement of
// the past, what a causal estimator could at best know) — beside the
// auto law and no shaper. It logs the table docs/BENCHMARKS.md gives
// ("What any shaper could reach on the traces"):
//
//	go test ./autorate -run TestTraceBounds -v
//
// and checks the model's sense: a shaper at 0.9 of the capacity it is
// told delivers about 0.9 of it, and the same shaper a window late
// queues more.
func TestTraceBounds(t *testing.T) {
	const span = 17 * time.Second // what an S2 phase replays
	for _, tc := range []struct {
		trace  string
		lo, hi uint64
	}{
		{"Verizon-LTE-short.up", 1 * mbit, 12 * mbit},
		{"TMobile-LTE-short.up", 2 * mbit, 27 * mbit},
		{"TMobile-UMTS-driving.up", mbit / 5, 3 * mbit / 2},
	} {
		t.Run(tc.trace, func(t *testing.T) {
			trace, err := linkem.LoadTrace(filepath.Join("..", "bench", "traces", tc.trace))
			if err != nil {
				t.Fatal(err)
			}
			idle, _, idleLate := shapedRun(trace, span, func(time.Duration) float64 { return 0 })
			// told returns a shaper at share of the capacity of each window
			// of length win, shifted back by lag windows.
			told := func(win time.Duration, lag int, share float64) func(time.Duration) float64 {
				return func(at time.Duration) float64 {
					from := at.Truncate(win) - time.Duration(lag)*win
					if from < 0 {
						return share * trace.Capacity(0, win) / win.Seconds()
					}
					return share * trace.Capacity(from, from+win) / win.Seconds()
				}
			}
			rows := []string{fmt.Sprintf("| %s | the probes alone (idle) | %v | %v | |", tc.trace, idle.Round(time.Millisecond), idleLate.Round(time.Millisecond))}
			row := func(name string, p99 time.Duration, kept float64, late time.Duration) {
				rows = append(rows, fmt.Sprintf("| | %s | %v | %v | %.2f |", name, p99.Round(time.Millisecond), late.Round(time.Millisecond), kept))
			}
			cfg := Config{Min: [2]uint64{tc.lo}, Max: [2]uint64{tc.hi}}
			full99, _, fullKept, fullLate := traceRun(t, tc.trace, cfg, span, true)
			row("no shaper (a sender at the range's top)", full99, fullKept, fullLate)
			law99, _, lawKept, lawLate := traceRun(t, tc.trace, cfg, span, false)
			row("`auto` (this package's law, from Max)", law99, lawKept, lawLate)
			kept := map[string]float64{}
			p99s := map[string]time.Duration{}
			for _, o := range []struct {
				win   time.Duration
				lag   int
				share float64
			}{
				{100 * time.Millisecond, 0, 0.9},
				{100 * time.Millisecond, 1, 0.9},
				{100 * time.Millisecond, 1, 0.8},
				{100 * time.Millisecond, 1, 0.7},
				{100 * time.Millisecond, 1, 0.5},
				{20 * time.Millisecond, 1, 0.9},
				{20 * time.Millisecond, 1, 0.8},
			} {
				when := "its own window (foresight)"
				if o.lag > 0 {
					when = "the window before"
				}
				name := fmt.Sprintf("%.1f of the capacity of %v windows, %s", o.share, o.win, when)
				p99, k, late := shapedRun(trace, span, told(o.win, o.lag, o.share))
				row(name, p99, k, late)
				key := fmt.Sprintf("%v/%d/%.1f", o.win, o.lag, o.share)
				kept[key], p99s[key] = k, p99
			}
			t.Logf("\n| trace | sender | probe's queue p99 | from 2 s | capacity delivered |\n|---|---|---|---|---|\n%s", joinLines(rows))
			if k := kept["100ms/0/0.9"]; k < 0.87 || k > 0.92 {
				t.Errorf("a shaper at 0.9 of the capacity it is told delivered %.2f of it", k)
			}
			if ahead, late := p99s["100ms/0/0.9"], p99s["100ms/1/0.9"]; late < ahead {
				t.Errorf("told a window late, the queue p99 is %v, below %v told in time", late, ahead)
			}
		})
	}
}

func joinLines(l []string) string {
	out := ""
	for i, s := range l {
		if i > 0 {
			out += "\n"
		}
		out += s
	}
	return out
}

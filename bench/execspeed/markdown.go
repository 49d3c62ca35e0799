package execspeed

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// WindowStats summarises a reservation arm's windows against a share of
// 20 % of a CPU: mean, min, max, and the shares of windows within ±2
// and within ±tol.
func WindowStats(ws []float64, tol float64) (mean, lo, hi, in2, inTol float64) {
	if len(ws) == 0 {
		return
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, w := range ws {
		mean += w
		lo, hi = math.Min(lo, w), math.Max(hi, w)
		if math.Abs(w-20) <= 2 {
			in2++
		}
		if math.Abs(w-20) <= tol {
			inTol++
		}
	}
	n := float64(len(ws))
	return mean / n, lo, hi, 100 * in2 / n, 100 * inTol / n
}

// HoldStats is the mean after the first five seconds and the largest
// deviation of a five-second mean from the target, relative.
func HoldStats(secs []float64, target float64) (mean, worst float64) {
	if len(secs) <= 5 || target <= 0 {
		return 0, 0
	}
	rest := secs[5:]
	for _, s := range rest {
		mean += s
	}
	mean /= float64(len(rest))
	for i := 0; i+5 <= len(rest); i++ {
		m := 0.0
		for _, s := range rest[i : i+5] {
			m += s
		}
		m /= 5
		worst = math.Max(worst, math.Abs(m-target)/target)
	}
	return mean, worst
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[int(q*float64(len(s)-1))]
}

// Markdown is the results as docs/BENCHMARKS.md shows them.
func (r *Results) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Seed 001: bandwidth by execution speed, and CPU reservations\n\n")
	fmt.Fprintf(&b, "`lanes bench execspeed`, %s; %s. The sender: UDP, %d-byte datagrams, each after %d rounds of SHA-256 over it (CPU-bound, as an encrypting or compressing sender), "+
		"from one namespace to another over a veth; free-running it sends %.1f Mbit/s of payload.\n\n", r.Started.Format("2006-01-02"), r.Host, Payload, r.Work, r.Free)
	if len(r.Figure4) > 0 {
		fmt.Fprintf(&b, "## Figure 4: send rate against the sender's CPU share\n\n")
		fmt.Fprintf(&b, "The share is a CFS quota in every 10 ms on the sender's group (what `cpu.send_rate` moves). The seed's Figure 4 is linear on its fast sender.\n\n")
		fmt.Fprintf(&b, "| CPU share | payload Mbit/s | CPU the sender used |\n|---:|---:|---:|\n")
		for _, p := range r.Figure4 {
			fmt.Fprintf(&b, "| %g %% | %.1f | %.1f %% |\n", p.Share, p.Mbps, p.Use)
		}
		if r.Fit != nil {
			fmt.Fprintf(&b, "\nLeast-squares line: rate = %.3f Mbit/s per %% + %.2f, **R² = %.4f** (goal: at least 0.98).\n\n", r.Fit.Slope, r.Fit.Intercept, r.Fit.R2)
		}
	}
	if len(r.Hists) > 0 {
		fmt.Fprintf(&b, "## Packet inter-arrival at the receiver\n\n")
		fmt.Fprintf(&b, "The seed: a slot the sender does not own delays the next packet by the run of such slots. Inside a run the sender's datagrams arrive tens of microseconds apart; the histograms are of the long gaps (a millisecond or more), the runs of time the sender did not own: with lanes' 10 ms quota period one stretch of about 10 ms × (1 − share) per period, with the cgroup default period (100 ms) stretches ten times as long.\n\n")
		fmt.Fprintf(&b, "| share | quota period | median gap | gaps of 1 ms or more | time in them | longest gap |\n|---:|---:|---:|---:|---:|---:|\n")
		for _, h := range r.Hists {
			fmt.Fprintf(&b, "| %g %% | %s | %.0f µs | %.2f %% | %.0f %% | %.1f ms |\n", h.Share, h.Period, h.Median, 100*h.Long, 100*h.Delayed, h.Max/1000)
		}
		b.WriteString("\n")
		for _, h := range r.Hists {
			fmt.Fprintf(&b, "Share %g %%, quota period %s: gaps of 1 ms or more, by length (bins of %s)\n\n```\n", h.Share, h.Period, h.Bin)
			bin, _ := time.ParseDuration(h.Bin)
			b.WriteString(Bars(h.Shares, bin))
			b.WriteString("```\n\n")
		}
	}
	if len(r.Holds) > 0 {
		fmt.Fprintf(&b, "## Holding a rate while load comes and goes\n\n")
		fmt.Fprintf(&b, "%d busy loops run through the middle third of the run; in the last third each datagram costs half as much CPU again (the data got harder to compress). `send_rate`: lanesd's `cpu.send_rate` at the target; `fixed share`: the seed's regulation, open loop — the share Figure 4's line gives for the target, guaranteed (the highest weight) and capped as lanesd sets it, but fixed (the baseline). Goal: within ±5 %% of the target over the run.\n\n", r.Hogs)
		fmt.Fprintf(&b, "| arm | target Mbit/s | mean after 5 s | worst 5 s mean off the target | share |\n|---|---:|---:|---:|---|\n")
		for _, h := range r.Holds {
			fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f %% | %s |\n", h.Arm, h.Target, h.Mean, 100*h.Worst, h.Share)
		}
		b.WriteString("\nPer-second payload rates (Mbit/s):\n\n")
		for _, h := range r.Holds {
			var xs []string
			for _, s := range h.Seconds {
				xs = append(xs, fmt.Sprintf("%.0f", s))
			}
			fmt.Fprintf(&b, "- %s: %s\n", h.Arm, strings.Join(xs, " "))
		}
		b.WriteString("\n")
	}
	if len(r.Reserve) > 0 {
		fmt.Fprintf(&b, "## Reservations: a busy loop's share of a CPU in every 100 ms window\n\n")
		fmt.Fprintf(&b, "Against %d busy loops on the host's CPUs (lanesd puts them in its default lane, `normal`), and alone. `none` is the baseline: the loop in that lane with them, no reservation, where it gets what CFS gives one of %d loops on %d CPUs and less with every competitor. Goal: 20 ± 2 %% in every window, a whole CPU alone.\n\n", r.Hogs, r.Hogs+1, r.Hogs/2)
		fmt.Fprintf(&b, "The tick assist column is lanesd's at the end of the arm; its cost is the CPU its threads used over the windows, and the busy loops' share what they got meanwhile (of %d CPUs).\n\n", r.Hogs/2)
		fmt.Fprintf(&b, "| arm | mechanism | tick assist | alone (median) | mean | min | max | windows within ±2 | within ±4 | the assist's CPU | the busy loops' |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, a := range r.Reserve {
			if a.Error != "" {
				fmt.Fprintf(&b, "| %s | %s | %s | error: %s |  |  |  |  |  |  |  |\n", a.Arm, a.Mechanism, a.TickAssist, a.Error)
				continue
			}
			mean, lo, hi, in2, in4 := WindowStats(a.Windows, 4)
			fmt.Fprintf(&b, "| %s | %s | %s | %.1f %% | %.1f %% | %.1f %% | %.1f %% | %.0f %% | %.0f %% | %.2f %% | %.1f %% |\n",
				a.Arm, a.Mechanism, a.TickAssist, a.Alone, mean, lo, hi, in2, in4, a.Assist, a.Others)
		}
		b.WriteString("\n")
	}
	return b.String()
}

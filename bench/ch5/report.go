package ch5

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Results are a run of the experiment.
type Results struct {
	Started    time.Time     `json:"started"`
	Host       string        `json:"host"`
	Link       string        `json:"link"`
	Duration   time.Duration `json:"duration"`
	Contention time.Duration `json:"contention"`
	StressCPU  int           `json:"stress_cpu"`
	Arms       []ArmResult   `json:"arms"`
}

// Write writes ch5.json, ch5.md and ch5.svg into dir.
func (r *Results) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("ch5 results: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("ch5 results: %w", err)
	}
	for name, data := range map[string][]byte{"ch5.json": b, "ch5.md": []byte(r.Markdown()), "ch5.svg": []byte(r.SVG())} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("ch5 results: %w", err)
		}
	}
	return nil
}

// Markdown is the summary table, then fps, jitter and quality per second
// per arm.
func (r *Results) Markdown() string {
	var b strings.Builder
	c := int(r.Contention / time.Second)
	fmt.Fprintf(&b, "# Chapter 5: video at %d fps under CPU contention and a greedy flow\n\n", TargetFPS)
	fmt.Fprintf(&b, "Run %s on %s. Link: %s. From t = %d s: `stress-ng --cpu %d` on each end and a greedy TCP flow (iperf3, cubic) over the link. %v per arm.\n\n",
		r.Started.Format(time.RFC3339), r.Host, r.Link, c, r.StressCPU, r.Duration)
	b.WriteString("| arm | fps before | fps from t+3 s: mean | min | ≥ 19 fps | onset min (3 s) | jitter ms | quality | PSNR dB | load (start → end) | host busy during |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, a := range r.Arms {
		s := a.Summary
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %d | %.0f %% of %d s | %d | %.1f | %.0f | %.1f | %s → %s | %.0f %% |\n",
			a.Arm, s.FPSBefore, s.FPSDuring, s.FPSMin, 100*s.Held, s.Seconds, s.OnsetMin, s.JitterDuring, s.QualityDuring, s.PSNRDuring,
			a.LoadStart, a.LoadEnd, 100*meanFrom(a.HostBusy, c))
	}
	b.WriteString("\n")
	for _, a := range r.Arms {
		fmt.Fprintf(&b, "- **%s**: %s. Per frame before contention: encode %.1f ms CPU, decode+check %.1f ms CPU at quality %.0f.", a.Arm, a.Description,
			a.Summary.EncodeCPU, a.Summary.DecodeCPU, a.Summary.EncodeQuality)
		for _, e := range a.Errors {
			fmt.Fprintf(&b, " ERROR: %s.", e)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Per second (fps / jitter ms / quality displayed)\n\n| t |")
	for _, a := range r.Arms {
		fmt.Fprintf(&b, " %s |", a.Arm)
	}
	b.WriteString("\n|---|")
	for range r.Arms {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for t := 0; t < int(r.Duration/time.Second); t++ {
		mark := ""
		if t == c {
			mark = " ◀"
		}
		fmt.Fprintf(&b, "| %d%s |", t, mark)
		for _, a := range r.Arms {
			if x, ok := second(a.Receiver, t); ok {
				fmt.Fprintf(&b, " %d / %.0f / %.0f |", x.Frames, x.Jitter, x.Quality)
			} else {
				b.WriteString(" – |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func second(xs []ReceiverSecond, t int) (ReceiverSecond, bool) {
	for _, x := range xs {
		if x.T == t {
			return x, true
		}
	}
	return ReceiverSecond{}, false
}

func meanFrom(xs []float64, from int) float64 {
	var s float64
	n := 0
	for i := from; i < len(xs); i++ {
		s += xs[i]
		n++
	}
	if n == 0 {
		return 0
	}
	return s / float64(n)
}

var armColours = map[string]string{"none": "#888888", "app": "#1f77b4", "rm": "#ff7f0e", "integrated": "#2ca02c"}

// SVG plots fps (top) and quality (bottom) per second for every arm.
func (r *Results) SVG() string {
	const W, H, left, top, ph, gap = 760, 520, 50, 30, 200, 60
	secs := int(r.Duration / time.Second)
	pw := W - left - 130
	x := func(t float64) float64 { return left + t*float64(pw)/float64(max(1, secs)) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	panels := []struct {
		title string
		maxY  float64
		y0    float64
		get   func(ReceiverSecond) float64
		ticks []float64
	}{
		{"frames displayed per second", 30, top, func(s ReceiverSecond) float64 { return float64(s.Frames) }, []float64{0, 10, 19, 20, 30}},
		{"quality displayed", 100, top + ph + gap, func(s ReceiverSecond) float64 { return s.Quality }, []float64{0, 25, 50, 75, 100}},
	}
	c := float64(r.Contention / time.Second)
	for _, p := range panels {
		y := func(v float64) float64 { return p.y0 + ph - min(v, p.maxY)*ph/p.maxY }
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", left, p.y0-8, p.title)
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%d" height="%d" fill="none" stroke="#000"/>`+"\n", left, p.y0, pw, ph)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%d" fill="#f3e0e0"/>`+"\n", x(c), p.y0, x(float64(secs))-x(c), ph)
		for _, tk := range p.ticks {
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n",
				left, left+pw, y(tk), y(tk), left-4, y(tk)+4, tk)
		}
		for t := 0; t <= secs; t += 10 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%d s</text>`+"\n", x(float64(t)), p.y0+ph+14, t)
		}
		for _, a := range r.Arms {
			var pts []string
			for _, s := range a.Receiver {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(s.T)+0.5), y(p.get(s))))
			}
			col := armColours[a.Arm]
			if col == "" {
				col = "#000"
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		}
	}
	for i, a := range r.Arms {
		col := armColours[a.Arm]
		if col == "" {
			col = "#000"
		}
		yy := top + 20 + 18*i
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n",
			left+pw+10, left+pw+30, yy, yy, col, left+pw+35, yy+4, a.Arm)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#a05050">shaded: stress-ng on both ends + greedy TCP flow</text>`+"\n", left, H-8)
	b.WriteString("</svg>\n")
	return b.String()
}

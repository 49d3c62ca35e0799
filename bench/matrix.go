package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// The report of a matrix scenario (seed 003's evaluation): per variant,
// one table per measure with a row per arm run (arm and PI) and a column
// per foreground intensity, and the same as grayscale density plots,
// lighter = higher, as the paper draws them.

// matrixRows lists the arm runs present in the summary, in the order
// they first appear, and the intensities.
func (r *Results) matrixRows(variant string) (runs []string, ints []float64) {
	seenRun, seenInt := map[string]bool{}, map[float64]bool{}
	for _, a := range r.Summary {
		if a.Variant != variant {
			continue
		}
		if l := label(a.Arm, a.PI); !seenRun[l] {
			seenRun[l] = true
			runs = append(runs, l)
		}
		if !seenInt[a.Intensity] {
			seenInt[a.Intensity] = true
			ints = append(ints, a.Intensity)
		}
	}
	return runs, ints
}

func (r *Results) variants() []string {
	var vs []string
	seen := map[string]bool{}
	for _, rf := range r.Reference {
		if !seen[rf.Variant] {
			seen[rf.Variant] = true
			vs = append(vs, rf.Variant)
		}
	}
	return vs
}

// cell returns the summary of one arm run at one intensity.
func (r *Results) cell(variant, run string, intensity float64) *ArmSummary {
	for i := range r.Summary {
		a := &r.Summary[i]
		if a.Variant == variant && label(a.Arm, a.PI) == run && a.Intensity == intensity {
			return a
		}
	}
	return nil
}

// measure is one quantity shown per cell.
type measure struct {
	title string
	get   func(*ArmSummary) Stat
	// shade maps a value to [0, 1] for the density plot (lighter =
	// better); nil: not plotted.
	shade  func(float64) float64
	format func(float64) string
}

func pct(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }

func (r *Results) measures() []measure {
	has := func(get func(*ArmSummary) Stat) bool {
		for i := range r.Summary {
			if get(&r.Summary[i]).N > 0 {
				return true
			}
		}
		return false
	}
	clamp := func(v float64) float64 { return math.Max(0, math.Min(1, v)) }
	ms := []measure{
		{"foreground kept (mixed / alone at the same intensity)", func(a *ArmSummary) Stat { return a.FgKept }, clamp, pct},
		{"background share of the leftover (bg / (capacity − fg alone))", func(a *ArmSummary) Stat { return a.BgShare }, clamp, pct},
	}
	if get := func(a *ArmSummary) Stat { return a.FgP99vsAlone }; has(get) {
		ms = append(ms, measure{"foreground request latency p99, × alone at the same intensity", get,
			func(v float64) float64 { return clamp(1 / v) }, func(v float64) string { return fmt.Sprintf("×%.2f", v) }})
	}
	if get := func(a *ArmSummary) Stat { return a.P99ms }; has(get) {
		ms = append(ms, measure{"interactive p99 ms", get, nil, func(v float64) string { return fmt.Sprintf("%.1f", v) }})
	}
	return ms
}

func (r *Results) matrixMarkdown(w io.Writer, svgName string) {
	m := r.Matrix
	fmt.Fprintf(w, "### %s\n\n", r.Scenario)
	if r.Description != "" {
		fmt.Fprintf(w, "%s\n\n", r.Description)
	}
	fmt.Fprintf(w, "Run %s–%s UTC, %d repeat(s), %v per cell; kernel %s, %d CPUs, load average %s at start, %s at the end.\n\n",
		r.Started.UTC().Format("2006-01-02 15:04"), r.Finished.UTC().Format("15:04"), r.Repeats, r.PhaseLength,
		r.Host.Kernel, r.Host.CPUs, r.Host.LoadStart, r.Host.LoadFinish)
	for _, l := range r.Links {
		fmt.Fprintf(w, "- link %s\n", l)
	}
	fmt.Fprintf(w, "- matrix: foreground intensity %v %% × PI %v", m.Intensities, m.PIs)
	if m.ReferenceArm != "" {
		fmt.Fprintf(w, "; the reference phases (alone) run under arm %s", label(m.ReferenceArm, m.ReferencePI))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| variant | intensity | fg alone Mbit/s | fg alone p99 ms | bg alone Mbit/s | idle p99 ms |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, rf := range r.Reference {
		fmt.Fprintf(w, "| %s | %g %% | %s | %s | %s | %s |\n", rf.Variant, rf.Intensity, fmtStat(rf.FgMbps, "%.2f"),
			fmtStat(rf.FgP99ms, "%.1f"), fmtStat(rf.BgMbps, "%.2f"), fmtStat(rf.IdleP99ms, "%.1f"))
	}
	for _, v := range r.variants() {
		runs, ints := r.matrixRows(v)
		for _, ms := range r.measures() {
			fmt.Fprintf(w, "\n**%s — %s**\n\n| arm \\ intensity |", v, ms.title)
			for _, in := range ints {
				fmt.Fprintf(w, " %g %% |", in)
			}
			fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(ints)))
			for _, run := range runs {
				fmt.Fprintf(w, "| %s |", run)
				for _, in := range ints {
					c := r.cell(v, run, in)
					if c == nil || ms.get(c).N == 0 {
						fmt.Fprint(w, " – |")
						continue
					}
					st := ms.get(c)
					txt := ms.format(st.Mean)
					if st.N > 1 && ms.format(st.Min) != ms.format(st.Max) {
						txt += " (" + ms.format(st.Min) + "–" + ms.format(st.Max) + ")"
					}
					fmt.Fprintf(w, " %s |", txt)
				}
				fmt.Fprintln(w)
			}
		}
	}
	fmt.Fprintln(w, "\nEvery cell:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| variant | intensity | arm | fg kept | bg share of leftover | fg Mbit/s | bg Mbit/s | fg p99 ms (× alone) | interactive p99 ms (× idle) | lanes PI ms / holds / preemptions / hold reaction p99 ms | emulator lateness p99 µs |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, a := range r.Summary {
		idle := "–"
		if a.IdleHolds.N > 0 {
			idle = fmt.Sprintf("%.1f / %.0f / %.0f / %.2f", a.IdlePIms.Mean, a.IdleHolds.Mean, a.IdlePreemptions.Mean, a.IdleReactionMs.Mean)
		}
		fmt.Fprintf(w, "| %s | %g %% | %s | %s | %s | %s | %s | %s (×%s) | %s (×%s) | %s | %s |\n", a.Variant, a.Intensity,
			label(a.Arm, a.PI), fmtStat(a.FgKept, "%.3f"), fmtStat(a.BgShare, "%.2f"), fmtStat(a.FgMbps, "%.2f"),
			fmtStat(a.BgMbps, "%.2f"), fmtStat(a.FgP99ms, "%.1f"), fmtStat(a.FgP99vsAlone, "%.2f"),
			fmtStat(a.P99ms, "%.1f"), fmtStat(a.P99vsIdle, "%.1f"), idle, fmtStat(a.LatenessUs, "%.0f"))
	}
	for _, a := range r.Summary {
		for _, e := range uniq(a.Errors) {
			fmt.Fprintf(w, "\n- **%s@%g%%/%s failed**: %s", a.Variant, a.Intensity, label(a.Arm, a.PI), e)
		}
	}
	if len(r.Paper) > 0 {
		fmt.Fprintln(w, "\n\nSeed 003 (Eggert & Touch) reports, for comparison:")
		fmt.Fprintln(w)
		for _, p := range r.Paper {
			fmt.Fprintf(w, "- %s\n", p)
		}
	}
	fmt.Fprintln(w)
	if svgName != "" {
		fmt.Fprintf(w, "\n![%s](%s)\n", r.Scenario, svgName)
	}
}

// heatmaps draws a density plot per variant and plotted measure (see
// WriteDensityPlots).
func (r *Results) heatmaps(w io.Writer) {
	var ms []measure
	for _, m := range r.measures() {
		if m.shade != nil {
			ms = append(ms, m)
		}
	}
	vs := r.variants()
	var grid [][]DensityPlot
	for _, v := range vs {
		runs, ints := r.matrixRows(v)
		var row []DensityPlot
		for _, m := range ms {
			p := DensityPlot{Title: m.title, Rows: runs, Intensities: ints, Shade: m.shade, Format: m.format}
			if len(vs) > 1 {
				p.Title = v + ": " + m.title
			}
			for _, run := range runs {
				vals := make([]float64, len(ints))
				for ii, in := range ints {
					vals[ii] = math.NaN()
					if c := r.cell(v, run, in); c != nil && m.get(c).N > 0 {
						vals[ii] = m.get(c).Mean
					}
				}
				p.Values = append(p.Values, vals)
			}
			row = append(row, p)
		}
		grid = append(grid, row)
	}
	WriteDensityPlots(w, r.Scenario, grid)
}

// DensityPlot is one panel of seed 003's density plots: a row per arm
// run (the PI growing upwards: Rows[0] is drawn at the bottom), a column
// per foreground intensity (in %), each cell gray from black (Shade 0) to
// white (Shade 1) with its value written in it.
type DensityPlot struct {
	Title       string
	Rows        []string
	Intensities []float64
	// Values holds a value per row and intensity; NaN: not measured.
	Values [][]float64
	Shade  func(float64) float64
	Format func(float64) string
}

// titleWidth estimates the width of a panel title (12 px sans-serif).
func titleWidth(s string) float64 { return 6.6*float64(utf8.RuneCountInString(s)) + 10 }

// WriteDensityPlots draws panels as one SVG image, a line of panels per
// element of grid (a variant of the scenario, say).
func WriteDensityPlots(w io.Writer, title string, grid [][]DensityPlot) {
	const (
		cellW, cellH = 54.0, 22.0
		labelW       = 150.0
		gapX, gapY   = 30.0, 70.0
		top          = 30.0
	)
	maxRuns, maxInts, maxPanels := 1, 1, 1
	for _, line := range grid {
		maxPanels = max(maxPanels, len(line))
		for _, p := range line {
			maxRuns, maxInts = max(maxRuns, len(p.Rows)), max(maxInts, len(p.Intensities))
		}
	}
	plotW := labelW + cellW*float64(maxInts)
	for _, line := range grid {
		for _, p := range line {
			// A panel is at least as wide as its title, so that titles do
			// not run into the next panel when there are few columns.
			plotW = max(plotW, titleWidth(p.Title))
		}
	}
	plotH := cellH*float64(maxRuns) + 40
	width := gapX + (plotW+gapX)*float64(maxPanels)
	height := top + (plotH+gapY)*float64(max(1, len(grid)))
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="%.0f" y="18" font-size="14">%s: density plots, lighter = higher (x: foreground intensity, y: arm and PI)</text>`+"\n",
		gapX, html.EscapeString(title))
	for li, line := range grid {
		y0 := top + 30 + (plotH+gapY)*float64(li)
		for pi, p := range line {
			x0 := gapX + (plotW+gapX)*float64(pi)
			fmt.Fprintf(w, `<text x="%.0f" y="%.1f" font-size="12">%s</text>`+"\n", x0, y0-8, html.EscapeString(p.Title))
			for ri, run := range p.Rows {
				// The first run at the bottom: the PI grows upwards.
				y := y0 + cellH*float64(len(p.Rows)-1-ri)
				fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0+labelW-6, y+cellH/2+4, html.EscapeString(run))
				for ii := range p.Intensities {
					x := x0 + labelW + cellW*float64(ii)
					val := math.NaN()
					if ri < len(p.Values) && ii < len(p.Values[ri]) {
						val = p.Values[ri][ii]
					}
					if math.IsNaN(val) {
						fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" fill="#f0d0d0" stroke="white"/>`+"\n", x, y, cellW, cellH)
						fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">–</text>`+"\n", x+cellW/2, y+cellH/2+4)
						continue
					}
					g := int(math.Round(255 * p.Shade(val)))
					ink := "black"
					if g < 128 {
						ink = "white"
					}
					fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" fill="rgb(%d,%d,%d)" stroke="white"/>`+"\n", x, y, cellW, cellH, g, g, g)
					fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%s</text>`+"\n", x+cellW/2, y+cellH/2+4, ink,
						html.EscapeString(p.Format(val)))
				}
			}
			yb := y0 + cellH*float64(len(p.Rows))
			for ii, in := range p.Intensities {
				fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%g %%</text>`+"\n", x0+labelW+cellW*(float64(ii)+0.5), yb+14, in)
			}
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">foreground intensity</text>`+"\n", x0+labelW+cellW*float64(len(p.Intensities))/2, yb+30)
		}
	}
	fmt.Fprintln(w, "</svg>")
}

package execspeed

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Fit is a least-squares line y = Slope·x + Intercept and its R².
type Fit struct {
	Slope, Intercept, R2 float64
}

// LineFit fits a line to the points (xs[i], ys[i]).
func LineFit(xs, ys []float64) (Fit, error) {
	n := float64(len(xs))
	if len(xs) != len(ys) || len(xs) < 2 {
		return Fit{}, fmt.Errorf("need two or more points, have %d and %d", len(xs), len(ys))
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return Fit{}, fmt.Errorf("all x are equal")
	}
	f := Fit{Slope: (n*sxy - sx*sy) / d}
	f.Intercept = (sy - f.Slope*sx) / n
	mean := sy / n
	var ssRes, ssTot float64
	for i := range xs {
		e := ys[i] - (f.Slope*xs[i] + f.Intercept)
		ssRes += e * e
		ssTot += (ys[i] - mean) * (ys[i] - mean)
	}
	f.R2 = 1
	if ssTot > 0 {
		f.R2 = 1 - ssRes/ssTot
	}
	return f, nil
}

// Histogram counts gaps in bins of width w up to max (the last bin takes
// everything above), as shares of all gaps.
func Histogram(gaps []time.Duration, w, max time.Duration) []float64 {
	n := int(max/w) + 1
	h := make([]float64, n)
	if len(gaps) == 0 {
		return h
	}
	for _, g := range gaps {
		i := int(g / w)
		if i >= n {
			i = n - 1
		}
		h[i]++
	}
	for i := range h {
		h[i] /= float64(len(gaps))
	}
	return h
}

// Bars draws a histogram as text: one row per bin that holds at least
// 0.1 %, a bar of '#' per 2 %.
func Bars(h []float64, w time.Duration) string {
	var b strings.Builder
	for i, v := range h {
		if v < 0.001 {
			continue
		}
		label := fmt.Sprintf("%v-%v", time.Duration(i)*w, time.Duration(i+1)*w)
		if i == len(h)-1 {
			label = fmt.Sprintf(">=%v", time.Duration(i)*w)
		}
		fmt.Fprintf(&b, "%12s %5.1f%% %s\n", label, 100*v, strings.Repeat("#", int(math.Round(v*50))))
	}
	return b.String()
}

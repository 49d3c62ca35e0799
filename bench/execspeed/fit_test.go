package execspeed

import (
	"math"
	"testing"
	"time"
)

func TestLineFit(t *testing.T) {
	f, err := LineFit([]float64{10, 20, 30, 40}, []float64{5, 10, 15, 20})
	if err != nil || math.Abs(f.Slope-0.5) > 1e-12 || math.Abs(f.Intercept) > 1e-9 || math.Abs(f.R2-1) > 1e-12 {
		t.Errorf("exact line: %+v, %v", f, err)
	}
	f, _ = LineFit([]float64{1, 2, 3, 4}, []float64{1, 3, 2, 4})
	if f.R2 > 0.7 || f.R2 < 0.5 {
		t.Errorf("scattered points: R² %g, want 0.64", f.R2)
	}
	if _, err := LineFit([]float64{1}, []float64{1}); err == nil {
		t.Error("one point fitted")
	}
	if _, err := LineFit([]float64{2, 2}, []float64{1, 3}); err == nil {
		t.Error("a vertical line fitted")
	}
}

func TestHistogram(t *testing.T) {
	ms := time.Millisecond
	h := Histogram([]time.Duration{100 * time.Microsecond, 200 * time.Microsecond, 1500 * time.Microsecond, 50 * ms}, ms, 5*ms)
	want := []float64{0.5, 0.25, 0, 0, 0, 0.25}
	for i := range want {
		if math.Abs(h[i]-want[i]) > 1e-12 {
			t.Fatalf("histogram %v, want %v", h, want)
		}
	}
	if s := Bars(h, ms); s == "" {
		t.Error("no bars")
	}
}

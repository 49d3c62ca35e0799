package bench

import (
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Panels are at least as wide as their titles: with two intensities the
// first panel's title must not run into the second panel.
func TestDensityPlotsTitlesDoNotOverlap(t *testing.T) {
	long := "background share of the leftover (bg / (capacity − fg alone))"
	panel := func(title string) DensityPlot {
		return DensityPlot{Title: title, Rows: []string{"none", "lanes"}, Intensities: []float64{50, 100},
			Values: [][]float64{{0.2, 0.3}, {0.9, 1}}, Shade: func(v float64) float64 { return v },
			Format: func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }}
	}
	var b strings.Builder
	WriteDensityPlots(&b, "t", [][]DensityPlot{{panel(long), panel("second")}})
	re := regexp.MustCompile(`<text x="([0-9.]+)" y="[0-9.]+" font-size="12">([^<]*)</text>`)
	m := re.FindAllStringSubmatch(b.String(), -1)
	if len(m) != 2 {
		t.Fatalf("found %d panel titles, want 2:\n%s", len(m), b.String())
	}
	x0, _ := strconv.ParseFloat(m[0][1], 64)
	x1, _ := strconv.ParseFloat(m[1][1], 64)
	if x1-x0 < titleWidth(html.EscapeString(long))-10 {
		t.Errorf("second panel at x %.0f, first at %.0f: the first title (about %.0f px) runs into it", x1, x0, titleWidth(long))
	}
}

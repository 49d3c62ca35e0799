package ch5

import (
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	// 20 seconds, contention at 5: seconds 5-7 are the onset, 8-19 count.
	mk := func(fps func(t int) int) *ArmResult {
		r := &ArmResult{Arm: "x"}
		for s := 0; s < 20; s++ {
			r.Receiver = append(r.Receiver, ReceiverSecond{T: s, Frames: fps(s), Jitter: 2, Quality: 50, PSNR: 30, DecodeCPU: 4})
			r.Sender = append(r.Sender, SenderSecond{T: s, Frames: 20, Quality: 100, EncodeCPU: 18})
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		fps      func(int) int
		held     float64
		min      int
		onsetMin int
	}{
		{"steady", func(int) int { return 20 }, 1, 20, 20},
		{"onset dip only", func(t int) int {
			if t == 6 {
				return 5
			}
			return 20
		}, 1, 20, 5},
		{"collapse", func(t int) int {
			if t >= 5 {
				return 10
			}
			return 20
		}, 0, 10, 10},
		{"one second short", func(t int) int {
			if t == 12 {
				return 18
			}
			return 20
		}, 11.0 / 12, 18, 20},
	} {
		s := Summarize(mk(tc.fps), 5)
		if s.Seconds != 12 || s.Held != tc.held || s.FPSMin != tc.min || s.OnsetMin != tc.onsetMin {
			t.Errorf("%s: seconds %d held %v min %d onset %d; want 12 %v %d %d", tc.name, s.Seconds, s.Held, s.FPSMin, s.OnsetMin, tc.held, tc.min, tc.onsetMin)
		}
		if s.FPSBefore != 20 || s.QualityDuring != 50 || s.EncodeCPU != 18 || s.DecodeCPU != 4 || s.EncodeQuality != 100 {
			t.Errorf("%s: %+v", tc.name, s)
		}
	}
}

func TestReport(t *testing.T) {
	r := &Results{Duration: 12 * time.Second, Contention: 4 * time.Second, Host: "h", Link: "l", StressCPU: 2}
	for _, arm := range []string{"none", "integrated"} {
		a := ArmResult{Arm: arm, Description: arm + " arm", HostBusy: []float64{0.5, 1}}
		for s := 0; s < 12; s++ {
			a.Receiver = append(a.Receiver, ReceiverSecond{T: s, Frames: 20 - s, Quality: 80})
		}
		if arm == "none" {
			a.Errors = []string{"boom"}
		}
		a.Summary = Summarize(&a, 4)
		r.Arms = append(r.Arms, a)
	}
	md := r.Markdown()
	for _, want := range []string{"| none |", "| integrated |", "ERROR: boom", "| 4 ◀ |", " 9 / 0 / 80 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	svg := r.SVG()
	if strings.Count(svg, "<polyline") != 4 || !strings.HasSuffix(svg, "</svg>\n") {
		t.Errorf("svg: %d polylines (want 2 arms × 2 panels)", strings.Count(svg, "<polyline"))
	}
}

package cli

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
)

func f(v float64) *float64 { return &v }

func TestParseReportArgs(t *testing.T) {
	cases := []struct {
		args, targets []string
		want          api.ReportRequest
		err           string
	}{
		{[]string{"fps=19.5", "latency_ms=40"}, []string{"fps=18:25"}, api.ReportRequest{
			Metrics: map[string]float64{"fps": 19.5, "latency_ms": 40},
			Targets: map[string]api.Target{"fps": {Min: f(18), Max: f(25)}}}, ""},
		{[]string{"q=1"}, []string{"q=:50"}, api.ReportRequest{Metrics: map[string]float64{"q": 1}, Targets: map[string]api.Target{"q": {Max: f(50)}}}, ""},
		{[]string{"q=1"}, []string{"q=2:"}, api.ReportRequest{Metrics: map[string]float64{"q": 1}, Targets: map[string]api.Target{"q": {Min: f(2)}}}, ""},
		{[]string{"fps"}, nil, api.ReportRequest{}, `"fps" is not METRIC=VALUE`},
		{[]string{"fps=fast"}, nil, api.ReportRequest{}, `"fast" is not a number`},
		{[]string{"a=1", "a=2"}, nil, api.ReportRequest{}, `metric "a" given twice`},
		{[]string{"a=1"}, []string{"a=1-2"}, api.ReportRequest{}, `--target "a=1-2" is not METRIC=MIN:MAX`},
		{[]string{"a=1"}, []string{"a=:"}, api.ReportRequest{}, `is not METRIC=MIN:MAX`},
		{[]string{"a=1"}, []string{"a=x:2"}, api.ReportRequest{}, `"x" is not a number`},
	}
	for _, tc := range cases {
		got, err := ParseReportArgs(tc.args, tc.targets)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %v: err %v, want %q", tc.args, tc.targets, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v %v: %+v, %v; want %+v", tc.args, tc.targets, got, err, tc.want)
		}
	}
}

func TestCaret(t *testing.T) {
	cases := []struct {
		expr      string
		line, col int
		want      string
	}{
		{"payload.fps < ", 1, 15, "  payload.fps < \n                ^"},
		{"topic + 1", 1, 7, "  topic + 1\n        ^"},
		{"true &&\n\tfps > 1", 2, 2, "  \tfps > 1\n  \t^"},
		{"a\nb", 0, 0, "  a\n  b"},
	}
	for _, tc := range cases {
		if got := Caret(tc.expr, tc.line, tc.col); got != tc.want {
			t.Errorf("Caret(%q, %d, %d) =\n%s\nwant\n%s", tc.expr, tc.line, tc.col, got, tc.want)
		}
	}
}

func TestFormatEvent(t *testing.T) {
	tm := time.Date(2026, 11, 23, 21, 0, 0, 5e6, time.Local)
	cases := []struct {
		ev   api.Event
		want string
	}{
		{api.Event{Time: tm, Source: "monitor/lane", Topic: "lane.video.cpu", Payload: map[string]any{"usage": 0.25, "psi_some_avg10": 1.5}},
			"2026-11-23 21:00:00.005 monitor/lane lane.video.cpu psi_some_avg10=1.5 usage=0.25"},
		{api.Event{Time: tm, Source: "app/7", Topic: "app.7.report", Payload: map[string]any{"lane": "", "pid": 7.0, "note": "a b", "ok": true, "l": []any{1.0}}},
			`2026-11-23 21:00:00.005 app/7 app.7.report l=[1] lane="" note="a b" ok=true pid=7`},
		{api.Event{Time: tm, Source: "x", Topic: "proc.exec"}, "2026-11-23 21:00:00.005 x proc.exec"},
	}
	for _, tc := range cases {
		if got := FormatEvent(tc.ev); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

package daemon

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/events"
)

// The stream's hand-written encoding is encoding/json's, byte for byte.
func TestAppendEventJSON(t *testing.T) {
	tm := time.Date(2026, 11, 23, 22, 0, 0, 123456789, time.UTC)
	cases := []events.Event{
		{Seq: 1, Time: tm, Source: "monitor/proc", Topic: "proc.exec", Payload: map[string]any{"pid": int64(42), "ppid": int64(1)}},
		{Seq: 1 << 63, Time: tm.In(time.FixedZone("x", 3600)), Source: "a\"b\\c\n\t\x01<>&\u2028é\xff", Topic: "t"},
		{Seq: 3, Time: tm, Deadline: tm.Add(time.Second), Source: "s", Topic: "lane.x.cpu", Payload: map[string]any{
			"usage": 0.25, "zero": 0.0, "neg": -1.5, "big": 1e21, "small": 1e-7, "tiny": 5e-324, "max": math.MaxFloat64,
			"int": 3.0, "u": uint64(math.MaxUint64), "i": int64(math.MinInt64), "b": false, "s": "", "n": nil,
			"list": []any{1.0, "x", true}, "map": map[string]any{"k": []any{}}, "e-9": 1e-9, "1e+22": 1e22, "mid": 123456789.125}},
		{Seq: 4, Time: time.Time{}, Source: "", Topic: "", Payload: map[string]any{}},
	}
	for _, e := range cases {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got := appendEventJSON(nil, &e)
		if string(got) != string(want)+"\n" {
			t.Errorf("event %v:\ngot  %s\nwant %s", e, got, want)
		}
	}
}

package bridge

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/events"
)

func TestWireRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 23, 21, 0, 0, 123456789, time.UTC)
	e := events.Event{Time: now, Source: "app/42", Topic: "app.42.report", Deadline: now.Add(time.Second),
		Payload: map[string]any{"fps": 18.5, "fps_min": int64(19), "frames": uint64(1) << 63, "ok": true,
			"name": "video", "list": []any{int64(1), 2.5, "x"}, "nested": map[string]any{"a": int64(-3)}}}
	data, err := encode(&e)
	if err != nil {
		t.Fatal(err)
	}
	got, host, err := decode(Subject("B", e.Topic), data)
	if err != nil {
		t.Fatal(err)
	}
	if host != "B" || got.Topic != e.Topic || got.Source != "host/B/app/42" || !got.Time.Equal(now) || !got.Deadline.Equal(e.Deadline) {
		t.Errorf("got %v from host %s", got, host)
	}
	if !reflect.DeepEqual(got.Payload, e.Payload) {
		t.Errorf("payload %#v, want %#v", got.Payload, e.Payload)
	}
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name, subj, data, want string
	}{
		{"not json", "lanes.B.app.1.report", "hello", "decode"},
		{"unknown field", "lanes.B.app.1.report", `{"source":"x","bogus":1}`, "unknown field"},
		{"trailing data", "lanes.B.app.1.report", `{"source":"x"} {}`, "data after"},
		{"no topic", "lanes.B", `{"source":"x"}`, "no host and topic"},
		{"other prefix", "other.B.app", `{"source":"x"}`, "does not begin"},
		{"huge number", "lanes.B.app.1.report", `{"source":"x","payload":{"v":1e999}}`, "out of range"},
		{"too large", "lanes.B.app.1.report", `{"source":"` + strings.Repeat("x", MaxMessage) + `"}`, "more than"},
		{"no source", "lanes.B.app.1.report", `{"source":""}`, "no source"},
		{"too deep", "lanes.B.app.1.report", `{"source":"x","payload":{"a":[[[[[[[1]]]]]]]}}`, "nested"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decode(tt.subj, []byte(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("decode(%q, %q) = %v, want an error with %q", tt.subj, tt.data, err, tt.want)
			}
		})
	}
}

// Events that decode but are invalid as events are refused by
// ValidateEvent in receive (tested with a server in TestBridgeAcrossHosts).
func TestDecodedInvalid(t *testing.T) {
	tests := []struct{ name, subj, data string }{
		{"bad topic char", "lanes.B.app.$x.report", `{"source":"x"}`},
		{"long string", "lanes.B.app.1.report", `{"source":"x","payload":{"s":"` + strings.Repeat("y", events.MaxStringLen+1) + `"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _, err := decode(tt.subj, []byte(tt.data))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if err := events.ValidateEvent(&e); err == nil {
				t.Errorf("ValidateEvent(%v) passed", e)
			}
		})
	}
}

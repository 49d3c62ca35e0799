package daemon

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/events"
)

// Every body POST /v1/move accepts is a valid request that survives
// encoding again, and every refusal is a bad-request error, whatever the
// bytes (seed corpus: testdata/fuzz/FuzzParseMove).
func FuzzParseMove(f *testing.F) {
	for _, s := range []string{`{"pids":[1],"lane":"background"}`, `{"pids":[1,2,3],"lane":"x"} `, `{"pids":[]}`, `{"pids":[-1],"lane":"a"}`, `[]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := parseMove(body)
		if e != nil {
			if e.Code != api.CodeBadRequest || e.Message == "" {
				t.Fatalf("refusal %+v: want a bad-request error with a message", e)
			}
			return
		}
		if len(req.PIDs) == 0 || req.Lane == "" {
			t.Fatalf("accepted %q as %+v: no PIDs or no lane", body, req)
		}
		seen := map[int]bool{}
		for _, pid := range req.PIDs {
			if pid <= 0 || pid > maxPID || seen[pid] {
				t.Fatalf("accepted %q with PID %d (invalid or repeated)", body, pid)
			}
			seen[pid] = true
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		req2, e := parseMove(again)
		if e != nil || !reflect.DeepEqual(req, req2) {
			t.Fatalf("%q -> %+v -> %s -> %+v, %v", body, req, again, req2, e)
		}
	})
}

// POST /v1/reload takes an empty body or an empty object, nothing else
// (seed corpus: testdata/fuzz/FuzzParseReload).
func FuzzParseReload(f *testing.F) {
	for _, s := range []string{``, `{}`, ` {} `, `{"x":1}`, `{}{}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e := parseReload(body)
		if e != nil {
			if e.Code != api.CodeBadRequest {
				t.Fatalf("refusal %+v: want bad-request", e)
			}
			return
		}
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) == 0 {
			return
		}
		var v map[string]any
		if err := json.Unmarshal(trimmed, &v); err != nil || len(v) != 0 {
			t.Fatalf("accepted %q: not an empty object (%v, %v)", body, v, err)
		}
	})
}

// Every body POST /v1/report accepts has 1..32 metrics with valid names
// and finite values, targets for reported metrics only with min <= max,
// and a payload with no key given twice; every refusal is a bad-request
// error (seed corpus: testdata/fuzz/FuzzParseReport).
func FuzzParseReport(f *testing.F) {
	for _, s := range []string{
		`{"metrics":{"fps":19.5,"latency_ms":40},"targets":{"fps":{"min":18,"max":25}}}`,
		`{"metrics":{"fps":1}}`, `{"metrics":{}}`, `{"metrics":{"FPS":1}}`, `{"metrics":{"pid":1}}`,
		`{"metrics":{"a":1},"targets":{"a":{"min":2,"max":1}}}`, `{"metrics":{"a":1,"a_min":0},"targets":{"a":{"min":0}}}`,
		`{"metrics":{"a":1e400}}`, `{"metrics":{"a":1}} {}`, `{"metrics":{"a":1},"pid":-1}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := parseReport(body)
		if e != nil {
			if e.Code != api.CodeBadRequest || e.Message == "" {
				t.Fatalf("refusal %+v: want a bad-request error with a message", e)
			}
			return
		}
		if len(req.Metrics) == 0 || len(req.Metrics) > api.MaxReportMetrics {
			t.Fatalf("accepted %q with %d metrics", body, len(req.Metrics))
		}
		for k, v := range req.Metrics {
			if checkMetricName(k) != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("accepted %q: metric %q = %v", body, k, v)
			}
		}
		for k, tg := range req.Targets {
			if _, ok := req.Metrics[k]; !ok || (tg.Min == nil && tg.Max == nil) || (tg.Min != nil && tg.Max != nil && *tg.Min > *tg.Max) {
				t.Fatalf("accepted %q: target %q %+v", body, k, tg)
			}
		}
		p := reportPayload(req, 1, 2, "x")
		keys := len(req.Metrics) + 3
		for _, tg := range req.Targets {
			if tg.Min != nil {
				keys++
			}
			if tg.Max != nil {
				keys++
			}
		}
		if len(p) != keys {
			t.Fatalf("accepted %q: payload %v has %d keys, want %d (a key given twice)", body, p, len(p), keys)
		}
		ev := events.Event{Source: "app/1", Topic: AppTopic(1, "report"), Payload: p}
		if err := events.ValidateEvent(&ev); err != nil {
			t.Fatalf("accepted %q: the report is not a valid event: %v", body, err)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		req2, e := parseReport(again)
		if e != nil || !reflect.DeepEqual(req, req2) {
			t.Fatalf("%q -> %+v -> %s -> %+v, %v", body, req, again, req2, e)
		}
	})
}

// FuzzParseContact: a contact request is accepted only as one JSON
// object with distinct, non-empty lane names, and reads back the same.
func FuzzParseContact(f *testing.F) {
	for _, s := range []string{`{"up":true}`, `{"up":false,"lanes":["sync"]}`, `{"lanes":["a","a"]}`, `{"lanes":[""]}`, `{"up":1}`, `{"up":true}x`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := parseContact(body)
		if e != nil {
			if e.Code != api.CodeBadRequest || e.Message == "" {
				t.Fatalf("refusal %+v: want a bad-request error with a message", e)
			}
			return
		}
		seen := map[string]bool{}
		for _, l := range req.Lanes {
			if l == "" || seen[l] {
				t.Fatalf("accepted %q with lane %q (empty or repeated)", body, l)
			}
			seen[l] = true
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		back, e := parseContact(again)
		if e != nil || back.Up != req.Up || len(back.Lanes) != len(req.Lanes) {
			t.Fatalf("%q -> %+v -> %s -> %+v, %v", body, req, again, back, e)
		}
	})
}

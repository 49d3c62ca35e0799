package daemon

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/lanes-qos/lanes/api"
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

package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/api"
)

func TestRoutesSorted(t *testing.T) {
	if !sort.SliceIsSorted(routes, func(i, j int) bool { return routes[i].path < routes[j].path }) {
		t.Error("routes table is not sorted by path")
	}
	for _, r := range routes {
		if !strings.HasPrefix(r.path, "/v1/") {
			t.Errorf("route %s is not under /v1/", r.path)
		}
	}
}

// Requests that never reach a handler: wrong method, unknown route, a
// browser's request. Every error is JSON with a code, and the version header is set.
func TestRequestsRefusedBeforeHandlers(t *testing.T) {
	var logged strings.Builder
	d := &Daemon{logf: func(f string, a ...any) { fmt.Fprintf(&logged, f+"\n", a...) }}
	h := d.handler()
	cases := []struct {
		method, path string
		header       map[string]string
		status       int
		code         string
	}{
		{http.MethodGet, api.RouteMove, nil, http.StatusMethodNotAllowed, api.CodeMethod},
		{http.MethodPost, api.RouteStatus, nil, http.StatusMethodNotAllowed, api.CodeMethod},
		{http.MethodGet, "/v2/status", nil, http.StatusNotFound, api.CodeNotFound},
		{http.MethodGet, api.RouteStatus, map[string]string{"Origin": "http://example.test"}, http.StatusForbidden, api.CodeForbidden},
		{http.MethodGet, api.RouteStatus, map[string]string{"Referer": "http://example.test/"}, http.StatusForbidden, api.CodeForbidden},
	}
	for _, tc := range cases {
		logged.Reset()
		req := httptest.NewRequest(tc.method, tc.path, nil)
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), `"code": "`+tc.code+`"`) {
			t.Errorf("%s %s %v: %d %s; want %d %s", tc.method, tc.path, tc.header, rec.Code, rec.Body, tc.status, tc.code)
		}
		if rec.Header().Get(api.VersionHeader) != api.Version {
			t.Errorf("%s %s: no version header", tc.method, tc.path)
		}
		// A browser's request is refused as other refusals are: logged.
		if tc.code == api.CodeForbidden && !strings.Contains(logged.String(), "refused: a browser's request") {
			t.Errorf("%s %s %v: refusal not logged (log %q)", tc.method, tc.path, tc.header, logged.String())
		}
	}
}

// A request body is one JSON object: anything after it but white space is
// refused, named.
func TestTrailingDataRefused(t *testing.T) {
	d := &Daemon{logf: t.Logf}
	cases := []struct {
		name, body string
		status     int
		msg        string
	}{
		{"second object", `{"pids": [1], "lane": "background"} {"pids": [2], "lane": "interactive"}`, http.StatusBadRequest, `trailing data after the request object at byte 36: "{\"pids\": [2], \"lane\": \"interactive\"}"`},
		{"garbage", `{"pids": [1], "lane": "background"}x`, http.StatusBadRequest, `trailing data after the request object at byte 35: "x"`},
		{"long", `{"pids": [1], "lane": "background"}` + strings.Repeat("y", 100), http.StatusBadRequest, `"` + strings.Repeat("y", 40) + `..."`},
		{"white space only", "{\"pids\": [], \"lane\": \"background\"} \n\t", http.StatusBadRequest, "no PIDs given"},
		{"unknown field", `{"pids": [1], "lane": "background", "x": 1}`, http.StatusBadRequest, `unknown field "x"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, api.RouteMove, strings.NewReader(tc.body))
			rec := httptest.NewRecorder()
			d.handler().ServeHTTP(rec, req)
			var e api.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatalf("%s: %v", rec.Body, err)
			}
			if rec.Code != tc.status || e.Code != api.CodeBadRequest || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("%d %s; want %d with %s", rec.Code, rec.Body, tc.status, tc.msg)
			}
		})
	}
}

// A request without peer credentials (not from a Unix socket) is the least
// privileged caller: it may not move or reload.
func TestNoCredentialsIsUnprivileged(t *testing.T) {
	d := &Daemon{logf: t.Logf}
	for _, path := range []string{api.RouteReload} {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}"))
		rec := httptest.NewRecorder()
		d.handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("POST %s without credentials: %d %s", path, rec.Code, rec.Body)
		}
	}
}

func TestLaneOfGroup(t *testing.T) {
	cases := map[string]string{
		"/":                            "",
		"/lanes-background":            "background",
		"/lanes-background/sub":        "background",
		"/lanes-run-123-interactive":   "interactive",
		"/lanes-run-123-my-lane":       "my-lane",
		"/user.slice/lanes-background": "",
		"/system.slice/backup.service": "",
	}
	for in, want := range cases {
		if got := laneOfGroup(in); got != want {
			t.Errorf("laneOfGroup(%q) = %q, want %q", in, got, want)
		}
	}
}

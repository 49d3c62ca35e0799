package api_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
)

// The wire format is the API's contract with programs that are not ours:
// field names, durations in nanoseconds, omitted empty fields.
func TestWireFormat(t *testing.T) {
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"move request", api.MoveRequest{PIDs: []int{42, 43}, Lane: "background"}, `{"pids":[42,43],"lane":"background"}`},
		{"move response", api.MoveResponse{Lane: "background", Moved: []int{42}}, `{"lane":"background","moved":[42]}`},
		{"error", api.Errorf(api.CodeUnknownLane, "unknown lane %q", "video"), `{"error":"unknown lane \"video\"","code":"unknown-lane"}`},
		{"cpu settings without cap", api.CPUSettings{Weight: 100}, `{"weight":100,"idle":false}`},
		{"disk settings unchanged", api.DiskSettings{}, `{"level":0}`},
		{"net settings in bit/s", api.NetSettings{Priority: 1, Rate: 8_000_000}, `{"priority":1,"rate":8000000,"borrow":false}`},
		{"lane cpu time in ns", api.Lane{Name: "normal", Members: []int{}, CPUTime: 1500 * time.Millisecond},
			`{"name":"normal","unprivileged":false,"cpu":{"weight":0,"idle":false},"disk":{"level":0},"net":{"priority":0,"borrow":false},"cgroup":"","members":[],"cpu_time_ns":1500000000}`},
		{"percentiles in ns", api.Percentiles{N: 3, P50: time.Millisecond, P99: 2 * time.Millisecond, Max: 3 * time.Millisecond}, `{"n":3,"p50_ns":1000000,"p99_ns":2000000,"max_ns":3000000}`},
		{"doctor", api.DoctorResponse{Kernel: "6.18", Mechanisms: []api.Mechanism{{Resource: "cpu", Backend: "v2", Preferred: true, Reason: "probed", OK: true}}},
			`{"kernel":"6.18","mechanisms":[{"resource":"cpu","backend":"v2","preferred":true,"reason":"probed","ok":true}]}`},
		{"reload", api.ReloadResponse{Config: "/etc/lanes/lanes.toml", Lanes: []string{"normal"}}, `{"config":"/etc/lanes/lanes.toml","lanes":["normal"]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("got  %s\nwant %s", b, tc.want)
			}
		})
	}
}

// Errors: an *api.Error is an error whose text is its message, built with
// a code and a format, and decodes from what the daemon sends.
func TestError(t *testing.T) {
	cases := []struct {
		code, format string
		args         []any
		want         string
	}{
		{api.CodeBadRequest, "invalid PID %d", []any{-1}, "invalid PID -1"},
		{api.CodeForbidden, "only root may reload the config (caller uid %d)", []any{1000}, "only root may reload the config (caller uid 1000)"},
		{api.CodeInternal, "plain", nil, "plain"},
	}
	for _, tc := range cases {
		var err error = api.Errorf(tc.code, tc.format, tc.args...)
		var e *api.Error
		if !errors.As(err, &e) || e.Code != tc.code || err.Error() != tc.want {
			t.Errorf("Errorf(%q, %q): %v (code %q), want %q (code %q)", tc.code, tc.format, err, e.Code, tc.want, tc.code)
		}
		b, _ := json.Marshal(e)
		var back api.Error
		if err := json.Unmarshal(b, &back); err != nil || back != *e {
			t.Errorf("round trip of %s: %+v, %v", b, back, err)
		}
	}
}

// Routes are versioned, distinct, and the codes are distinct.
func TestRoutesAndCodes(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range []string{api.RouteDoctor, api.RouteLanes, api.RouteMove, api.RouteProcs, api.RouteReload, api.RouteStatus} {
		if !strings.HasPrefix(r, "/v1/") || seen[r] {
			t.Errorf("route %s: not under /v1/, or given twice", r)
		}
		seen[r] = true
	}
	for _, c := range []string{api.CodeBadRequest, api.CodeUnknownLane, api.CodeNoProcess, api.CodeForbidden, api.CodeConfig, api.CodeInternal, api.CodeNotFound, api.CodeMethod} {
		if c == "" || seen[c] {
			t.Errorf("code %q: empty, or given twice", c)
		}
		seen[c] = true
	}
	if !strings.HasPrefix(api.DefaultSocket, "/") {
		t.Errorf("default socket %q is not absolute", api.DefaultSocket)
	}
}

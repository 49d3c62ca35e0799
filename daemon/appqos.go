package daemon

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/peercred"
	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/cgroup"
)

// Application QoS reports and directives (issue 14, point 6): a program
// tells lanesd how well it is doing (POST /v1/report) and hears back what
// a controller wants of it (GET /v1/directives). Both are about the
// calling process only, as the kernel names it (SO_PEERCRED).

var metricNameRE = regexp.MustCompile(`^[a-z0-9_]+$`)

// reservedMetrics are payload keys the daemon sets itself.
var reservedMetrics = map[string]bool{"pid": true, "uid": true, "lane": true}

// parseReport parses and validates the body of POST /v1/report: at least
// one metric and at most api.MaxReportMetrics, names of [a-z0-9_] (not
// pid, uid or lane), finite values, targets only for reported metrics with
// min <= max, no key of the payload given twice (a metric "x_min" beside a
// target for "x"), nothing after the object.
func parseReport(body []byte) (api.ReportRequest, *api.Error) {
	var req api.ReportRequest
	if e := decode(body, &req); e != nil {
		return req, e
	}
	if len(req.Metrics) == 0 {
		return req, api.Errorf(api.CodeBadRequest, "no metrics given (want e.g. {\"metrics\": {\"fps\": 24}})")
	}
	if len(req.Targets) == 0 {
		req.Targets = nil // "targets": {} is no targets, as an absent key is
	}
	if len(req.Metrics) > api.MaxReportMetrics {
		return req, api.Errorf(api.CodeBadRequest, "%d metrics, more than %d", len(req.Metrics), api.MaxReportMetrics)
	}
	if req.PID < 0 || req.PID > maxPID {
		return req, api.Errorf(api.CodeBadRequest, "invalid PID %d", req.PID)
	}
	for _, name := range sortedNames(req.Metrics) {
		if err := checkMetricName(name); err != nil {
			return req, api.Errorf(api.CodeBadRequest, "metric %q: %v", name, err)
		}
		if v := req.Metrics[name]; math.IsNaN(v) || math.IsInf(v, 0) {
			return req, api.Errorf(api.CodeBadRequest, "metric %q: %v is not a finite number", name, v)
		}
	}
	for _, name := range sortedNames(req.Targets) {
		t := req.Targets[name]
		if _, ok := req.Metrics[name]; !ok {
			return req, api.Errorf(api.CodeBadRequest, "target for %q, which is not among the metrics reported", name)
		}
		if t.Min == nil && t.Max == nil {
			return req, api.Errorf(api.CodeBadRequest, "target for %q has neither min nor max", name)
		}
		for _, b := range []*float64{t.Min, t.Max} {
			if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
				return req, api.Errorf(api.CodeBadRequest, "target for %q: %v is not a finite number", name, *b)
			}
		}
		if t.Min != nil && t.Max != nil && *t.Min > *t.Max {
			return req, api.Errorf(api.CodeBadRequest, "target for %q: min %v is above max %v", name, *t.Min, *t.Max)
		}
		for _, suffix := range []string{"_min", "_max"} {
			if _, clash := req.Metrics[name+suffix]; clash {
				return req, api.Errorf(api.CodeBadRequest, "metric %q clashes with the target for %q (reported as %s)", name+suffix, name, name+suffix)
			}
		}
	}
	return req, nil
}

func checkMetricName(name string) error {
	switch {
	case len(name) > api.MaxMetricNameLen:
		return fmt.Errorf("name longer than %d bytes", api.MaxMetricNameLen)
	case !metricNameRE.MatchString(name):
		return fmt.Errorf("names are made of %s", api.ReportMetricCharset)
	case reservedMetrics[name]:
		return fmt.Errorf("name is reserved (the daemon adds pid, uid and lane)")
	}
	return nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// reportPayload is the payload of app.<pid>.report: the metrics, each
// target's bounds as <metric>_min and <metric>_max, and who reported.
func reportPayload(req api.ReportRequest, pid, uid int, laneName string) map[string]any {
	p := make(map[string]any, len(req.Metrics)+2*len(req.Targets)+3)
	for k, v := range req.Metrics {
		p[k] = v
	}
	for k, t := range req.Targets {
		if t.Min != nil {
			p[k+"_min"] = *t.Min
		}
		if t.Max != nil {
			p[k+"_max"] = *t.Max
		}
	}
	p["pid"], p["uid"], p["lane"] = int64(pid), int64(uid), laneName
	return p
}

// laneOfPID returns the lane process pid is in ("" for none).
func laneOfPID(pid int) string {
	m, err := cgroup.ProcMembership(pid)
	if err != nil {
		return ""
	}
	return laneOfMembership(m)
}

// AppTopic returns the topic of an application's events: app.<pid>.<kind>
// (kind "report" or "directive").
func AppTopic(pid int, kind string) string { return "app." + strconv.Itoa(pid) + "." + kind }

func (d *Daemon) serveReport(w http.ResponseWriter, r *http.Request) (any, *api.Error) {
	c := creds(r)
	body, e := readBody(r)
	if e != nil {
		return nil, e
	}
	req, e := parseReport(body)
	if e != nil {
		return nil, e
	}
	pid, uid := c.PID, c.UID
	if req.PID != 0 && req.PID != c.PID {
		if !c.IsRoot() {
			return nil, api.Errorf(api.CodeForbidden, "a process reports for itself only: uid %d (pid %d) may not report for pid %d", c.UID, c.PID, req.PID)
		}
		pi, err := enforce.ReadProc(req.PID)
		if err != nil {
			return nil, api.Errorf(api.CodeNoProcess, "%v", err)
		}
		pid, uid = req.PID, pi.UID
	}
	if pid <= 0 {
		return nil, api.Errorf(api.CodeForbidden, "the caller's process is unknown (no peer credentials): reports need one")
	}
	if d.bus == nil {
		return nil, api.Errorf(api.CodeInternal, "the event channels are not running")
	}
	laneName := laneOfPID(pid)
	ev := events.Event{Source: "app/" + strconv.Itoa(pid), Topic: AppTopic(pid, "report"),
		Payload: reportPayload(req, pid, uid, laneName)}
	seq := d.bus.Publish(ev)
	if seq == 0 {
		return nil, api.Errorf(api.CodeInternal, "report not published (topic %s refused)", ev.Topic)
	}
	d.reports.keep(api.AppReport{PID: pid, UID: uid, Lane: laneName, Time: time.Now(), Metrics: req.Metrics})
	return api.ReportResponse{Topic: ev.Topic, Seq: seq, PID: pid, Lane: laneName}, nil
}

// maxReports bounds the processes whose last report status keeps.
const maxReports = 64

// lastReports keeps the last report of each process for status.
type lastReports struct {
	mu sync.Mutex
	by map[int]api.AppReport
}

func (l *lastReports) keep(r api.AppReport) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[int]api.AppReport{}
	}
	l.by[r.PID] = r
	for len(l.by) > maxReports {
		oldest := 0
		for pid, x := range l.by {
			if oldest == 0 || x.Time.Before(l.by[oldest].Time) {
				oldest = pid
			}
		}
		delete(l.by, oldest)
	}
}

// list is the reports of live processes that the caller may see (root:
// every one; another user: its own processes'; a caller without
// credentials: none), oldest first; those of processes gone are dropped.
func (l *lastReports) list(c peercred.Creds, alive func(pid int) bool) []api.AppReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []api.AppReport
	for pid, r := range l.by {
		if !alive(pid) {
			delete(l.by, pid)
			continue
		}
		if c.IsRoot() || (c.UID >= 0 && r.UID == c.UID) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// PublishDirective publishes a directive to application pid on the bus
// (app.<pid>.directive), as controllers do: the payload gains pid and the
// uid that owns the process, which is who may read it (GET /v1/events
// shows app.* events to root and to that uid only; GET /v1/directives to
// the process itself). It returns the event's sequence number.
func PublishDirective(bus *events.Bus, source string, pid int, payload map[string]any) (uint64, error) {
	pi, err := enforce.ReadProc(pid)
	if err != nil {
		return 0, fmt.Errorf("directive to pid %d: %w", pid, err)
	}
	p := make(map[string]any, len(payload)+2)
	for k, v := range payload {
		p[k] = v
	}
	p["pid"], p["uid"] = int64(pid), int64(pi.UID)
	ev := events.Event{Source: source, Topic: AppTopic(pid, "directive"), Payload: p}
	if err := events.ValidateEvent(&ev); err != nil {
		return 0, fmt.Errorf("directive to pid %d: %w", pid, err)
	}
	return bus.Publish(ev), nil
}

// serveDirectives streams the caller's own directives (NDJSON, live only)
// until the client goes away or the daemon stops.
func (d *Daemon) serveDirectives(w http.ResponseWriter, r *http.Request) (any, *api.Error) {
	c := creds(r)
	if c.PID <= 0 {
		return nil, api.Errorf(api.CodeForbidden, "the caller's process is unknown (no peer credentials): directives go to a process")
	}
	q := r.URL.Query()
	for k := range q {
		return nil, &api.Error{Code: api.CodeBadRequest, Param: k, Message: fmt.Sprintf("unknown parameter %q (directives take none)", k)}
	}
	p := streamParams{topics: []string{AppTopic(c.PID, "directive")}, follow: true}
	return d.stream(w, r, p, fmt.Sprintf("api/directives/%d", c.PID))
}

package api

import "time"

// Routes of the event channels (issue 14). Listed here rather than in
// api.go's block; still under /v1/.
const (
	RouteDirectives = "/v1/directives" // GET: NDJSON stream of the caller's app.<pid>.directive events
	RouteEvents     = "/v1/events"     // GET: NDJSON stream of events (history, then live)
	RouteReport     = "/v1/report"     // POST ReportRequest: an application's QoS report
)

// ContentNDJSON is the media type of the event streams: one JSON Event per
// line, flushed as events come.
const ContentNDJSON = "application/x-ndjson"

// TopicDropped is the topic of the event a stream inserts when its client
// fell behind and events were dropped (payload "dropped": how many since
// the last such event, "total": since the stream began).
const TopicDropped = "events.dropped"

// Event is one event of a stream: the JSON form of lanesd's events.Event
// (kept here so that clients need not link the event engine). Payload
// numbers arrive as float64.
type Event struct {
	Seq      uint64         `json:"seq"`
	Time     time.Time      `json:"time"`
	Source   string         `json:"source"`
	Topic    string         `json:"topic"`
	Deadline time.Time      `json:"deadline,omitzero"`
	Payload  map[string]any `json:"payload,omitempty"`
}

// Limits of a report (POST /v1/report).
const (
	MaxReportMetrics    = 32
	MaxMetricNameLen    = 64
	ReportMetricCharset = "a-z 0-9 _"
)

// ReportRequest is an application's report of its own quality of service:
// metric values, and optionally the range each should stay in.
type ReportRequest struct {
	Metrics map[string]float64 `json:"metrics"`
	Targets map[string]Target  `json:"targets,omitempty"`
	// PID reports for another process: root only (the CLI's --pid). 0:
	// the caller itself, as SO_PEERCRED gives it.
	PID int `json:"pid,omitempty"`
}

// Target is the range a metric should stay in; either bound may be absent.
type Target struct {
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
}

// ReportResponse says where the report was published.
type ReportResponse struct {
	Topic string `json:"topic"`
	Seq   uint64 `json:"seq"`
	PID   int    `json:"pid"`
	Lane  string `json:"lane"`
}

package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/lanes-qos/lanes/api"
)

// Report sends the calling process's QoS report (POST /v1/report).
func (c *Client) Report(ctx context.Context, req api.ReportRequest) (*api.ReportResponse, error) {
	var r api.ReportResponse
	return &r, c.do(ctx, http.MethodPost, api.RouteReport, req, &r)
}

// EventsQuery selects a stream's events (GET /v1/events).
type EventsQuery struct {
	Topics []string // patterns; none: every topic
	Filter string   // a CEL expression over topic, source, time, deadline, seq, payload
	Since  string   // RFC 3339 time or a duration before now; "": live only
	// Follow keeps the stream open for live events; false: the history
	// only (from Since), then the stream ends.
	Follow bool
	// Flush is the least time between two of the daemon's writes: events
	// that come sooner wait for the next (at most Flush; up to 250ms).
	// 0: each burst of events is sent at once. A busy stream costs the
	// daemon one write per Flush rather than one per burst.
	Flush time.Duration
}

func (q EventsQuery) values() url.Values {
	v := url.Values{}
	for _, t := range q.Topics {
		v.Add("topic", t)
	}
	if q.Filter != "" {
		v.Set("filter", q.Filter)
	}
	if q.Since != "" {
		v.Set("since", q.Since)
	}
	v.Set("follow", strconv.FormatBool(q.Follow))
	if q.Flush != 0 {
		v.Set("flush", q.Flush.String())
	}
	return v
}

// Stream is an open event stream. Next returns its events one by one;
// Raw the line of JSON each came as. Close ends it.
type Stream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
	raw  []byte
}

// Next returns the next event: io.EOF when the stream ended.
func (s *Stream) Next() (api.Event, error) {
	var e api.Event
	for s.sc.Scan() {
		line := s.sc.Bytes()
		if len(line) == 0 {
			continue
		}
		s.raw = line
		if err := json.Unmarshal(line, &e); err != nil {
			return e, fmt.Errorf("event stream: bad line %.80q: %w", line, err)
		}
		return e, nil
	}
	if err := s.sc.Err(); err != nil {
		return e, fmt.Errorf("event stream: %w", err)
	}
	return e, io.EOF
}

// Raw is the JSON line of the event Next returned last (valid until the
// next call).
func (s *Stream) Raw() []byte { return s.raw }

// Close ends the stream.
func (s *Stream) Close() error { return s.body.Close() }

// Events opens an event stream. Errors of the request (a bad filter: an
// *api.Error with Param, Expr, Line and Column) come back here, before any
// event.
func (c *Client) Events(ctx context.Context, q EventsQuery) (*Stream, error) {
	return c.stream(ctx, api.RouteEvents+"?"+q.values().Encode())
}

// Directives opens the stream of directives to the calling process.
func (c *Client) Directives(ctx context.Context) (*Stream, error) {
	return c.stream(ctx, api.RouteDirectives)
}

func (c *Client) stream(ctx context.Context, route string) (*Stream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://lanesd"+route, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", route, err)
	}
	// No overall timeout: a stream lasts as long as the caller wants.
	hc := &http.Client{Transport: c.hc.Transport}
	resp, err := hc.Do(req)
	if err != nil {
		if isNoDaemon(err) {
			return nil, fmt.Errorf("%w (socket %s)", ErrNoDaemon, c.Socket)
		}
		return nil, fmt.Errorf("GET %s: %w", route, err)
	}
	if v := resp.Header.Get(api.VersionHeader); v != "" && v != api.Version && !c.warned && c.Warnf != nil {
		c.warned = true
		c.Warnf("warning: lanesd is version %s, this client is %s", v, api.Version)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e api.Error
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			return nil, &e
		}
		return nil, &api.Error{Code: api.CodeInternal, Message: fmt.Sprintf("GET %s: %s", route, resp.Status)}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	return &Stream{body: resp.Body, sc: sc}, nil
}

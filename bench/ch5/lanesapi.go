package ch5

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// The application's side of lanesd's local API (HTTP on the Unix
// socket): POST /v1/report with its metrics and target ranges, and the
// NDJSON stream GET /v1/directives of the directives addressed to it.

func unixClient(socket string, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
			MaxIdleConns: 1,
		},
	}
}

type reporter struct {
	c *http.Client
}

func newReporter(socket string) *reporter { return &reporter{c: unixClient(socket, 2*time.Second)} }

type reportBody struct {
	Metrics map[string]float64            `json:"metrics"`
	Targets map[string]map[string]float64 `json:"targets,omitempty"`
}

// report posts one QoS report for this process.
func (r *reporter) report(ctx context.Context, metrics map[string]float64, targets map[string][2]float64) error {
	b := reportBody{Metrics: metrics, Targets: map[string]map[string]float64{}}
	for k, v := range targets {
		b.Targets[k] = map[string]float64{"min": v[0], "max": v[1]}
	}
	body, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://lanesd/v1/report", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.c.Do(req)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("report: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// directive is the part of a directive event the sender reads.
type directive struct {
	Topic   string         `json:"topic"`
	Payload map[string]any `json:"payload"`
}

// followDirectives reads the directive stream until ctx ends, calling
// setQuality for each directive with a numeric quality; it reconnects
// (every 500 ms at most) when the stream breaks.
func followDirectives(ctx context.Context, socket string, setQuality func(int)) {
	c := unixClient(socket, 0)
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://lanesd/v1/directives", nil)
		if err != nil {
			return
		}
		resp, err := c.Do(req)
		if err == nil {
			if resp.StatusCode == http.StatusOK {
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 4096), 1<<20)
				for sc.Scan() {
					var d directive
					if json.Unmarshal(sc.Bytes(), &d) != nil {
						continue
					}
					if q, ok := d.Payload["quality"].(float64); ok && q >= MinQuality-0.5 && q <= MaxQuality+0.5 {
						setQuality(int(q + 0.5))
					}
				}
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

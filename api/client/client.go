package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/lanes-qos/lanes/api"
)

// ErrNoDaemon means nothing listens on the socket.
var ErrNoDaemon = errors.New("no lanes daemon is running")

// Client talks to lanesd.
type Client struct {
	Socket string
	// Warnf, if set, receives a warning when the daemon's version differs
	// from this client's.
	Warnf func(format string, args ...any)

	hc     *http.Client
	warned bool
}

// New returns a client for the daemon at socket (api.DefaultSocket if empty).
func New(socket string) *Client {
	if socket == "" {
		socket = api.DefaultSocket
	}
	c := &Client{Socket: socket}
	c.hc = &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
		},
	}
	return c
}

// Alive reports whether a daemon answers on the socket.
func (c *Client) Alive(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := c.Status(ctx)
	return err == nil
}

func (c *Client) do(ctx context.Context, method, route string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://lanesd"+route, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, route, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if isNoDaemon(err) {
			return fmt.Errorf("%w (socket %s)", ErrNoDaemon, c.Socket)
		}
		return fmt.Errorf("%s %s: %w", method, route, err)
	}
	defer resp.Body.Close()
	if v := resp.Header.Get(api.VersionHeader); v != "" && v != api.Version && !c.warned && c.Warnf != nil {
		c.warned = true
		c.Warnf("warning: lanesd is version %s, this client is %s", v, api.Version)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, route, err)
	}
	if resp.StatusCode/100 != 2 {
		var e api.Error
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			return &e
		}
		return &api.Error{Code: api.CodeInternal, Message: fmt.Sprintf("%s %s: %s: %s", method, route, resp.Status, bytes.TrimSpace(data))}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode response: %w", method, route, err)
		}
	}
	return nil
}

func isNoDaemon(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist)
}

// Code returns the API error code of err, or "" if it is not an API error.
func Code(err error) string {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (*api.Status, error) {
	var s api.Status
	return &s, c.do(ctx, http.MethodGet, api.RouteStatus, nil, &s)
}

// Lanes lists lanes with members and usage.
func (c *Client) Lanes(ctx context.Context) (*api.LanesResponse, error) {
	var r api.LanesResponse
	return &r, c.do(ctx, http.MethodGet, api.RouteLanes, nil, &r)
}

// Procs lists processes in lanes.
func (c *Client) Procs(ctx context.Context) (*api.ProcsResponse, error) {
	var r api.ProcsResponse
	return &r, c.do(ctx, http.MethodGet, api.RouteProcs, nil, &r)
}

// Move puts processes (with their descendants) into a lane.
func (c *Client) Move(ctx context.Context, lane string, pids ...int) (*api.MoveResponse, error) {
	var r api.MoveResponse
	return &r, c.do(ctx, http.MethodPost, api.RouteMove, api.MoveRequest{Lane: lane, PIDs: pids}, &r)
}

// Doctor returns the daemon's view of the mechanisms in use.
func (c *Client) Doctor(ctx context.Context) (*api.DoctorResponse, error) {
	var r api.DoctorResponse
	return &r, c.do(ctx, http.MethodGet, api.RouteDoctor, nil, &r)
}

// Reload asks the daemon to reread its config file.
func (c *Client) Reload(ctx context.Context) (*api.ReloadResponse, error) {
	var r api.ReloadResponse
	return &r, c.do(ctx, http.MethodPost, api.RouteReload, struct{}{}, &r)
}

// Contact reports that a contact began (up) or ended, for the given
// boosting lanes (none: all).
func (c *Client) Contact(ctx context.Context, up bool, lanes []string) (*api.ContactResponse, error) {
	var r api.ContactResponse
	return &r, c.do(ctx, http.MethodPost, api.RouteContact, api.ContactRequest{Up: up, Lanes: lanes}, &r)
}

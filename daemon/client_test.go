package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/lane"
)

// serveAPI serves d's local API on a Unix socket, as lanesd does (the
// same handler and peer credentials), until the test ends.
func serveAPI(t *testing.T, d *Daemon) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "lanes.sock")
	ln, err := listen(sock, -1)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d.handler(), ConnContext: connContext}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// The API client against the daemon's handler over a Unix socket: every
// request the daemon refuses before changing anything comes back as an
// *api.Error with its stable code and a message naming the problem.
func TestClientRefusals(t *testing.T) {
	d := &Daemon{logf: t.Logf, cfg: lane.Default()}
	c := client.New(serveAPI(t, d))
	ctx := context.Background()
	cases := []struct {
		name string
		call func() error
		code string
		msg  string
	}{
		{"move without PIDs", func() error { _, err := c.Move(ctx, "background"); return err }, api.CodeBadRequest, "no PIDs given"},
		{"move without lane", func() error { _, err := c.Move(ctx, "", 1); return err }, api.CodeBadRequest, "no lane given"},
		{"move PID 0", func() error { _, err := c.Move(ctx, "background", 0); return err }, api.CodeBadRequest, "invalid PID 0"},
		{"move negative PID", func() error { _, err := c.Move(ctx, "background", -5); return err }, api.CodeBadRequest, "invalid PID -5"},
		{"move PID above PID_MAX_LIMIT", func() error { _, err := c.Move(ctx, "background", 1<<22+1); return err }, api.CodeBadRequest, fmt.Sprintf("invalid PID %d", 1<<22+1)},
		{"move PID twice", func() error { _, err := c.Move(ctx, "background", 7, 7); return err }, api.CodeBadRequest, "PID 7 given twice"},
		{"move to unknown lane", func() error { _, err := c.Move(ctx, "video", 1); return err }, api.CodeUnknownLane, `unknown lane "video"`},
		{"move an exited PID", func() error { _, err := c.Move(ctx, "background", 1<<22); return err }, api.CodeNoProcess, fmt.Sprint(1 << 22)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ae *api.Error
			if !errors.As(err, &ae) {
				t.Fatalf("got %v (%T), want an *api.Error", err, err)
			}
			if client.Code(err) != tc.code || !strings.Contains(ae.Message, tc.msg) {
				t.Errorf("got code %q %q, want %q with %q", client.Code(err), ae.Message, tc.code, tc.msg)
			}
		})
	}
}

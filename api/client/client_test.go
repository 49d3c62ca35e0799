package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
)

// The client against the daemon's own handler is tested in package daemon
// (TestClientRefusals); these are the client's own decisions.

// Without a daemon the client says so (ErrNoDaemon, naming the socket),
// which `lanes run` and `lanes doctor` take as "do it locally".
func TestNoDaemon(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays, nothing listens: ECONNREFUSED
	for _, sock := range []string{filepath.Join(dir, "none.sock"), stale} {
		_, err := client.New(sock).Status(context.Background())
		if !errors.Is(err, client.ErrNoDaemon) || !strings.Contains(err.Error(), sock) {
			t.Errorf("%s: got %v, want ErrNoDaemon naming the socket", sock, err)
		}
		if client.Code(err) != "" {
			t.Errorf("%s: code %q, want none (not an API error)", sock, client.Code(err))
		}
	}
}

// The client's handling of what a server sends: the version warning (once),
// error bodies that are not the API's, and responses it cannot decode.
func TestResponses(t *testing.T) {
	cases := []struct {
		name     string
		version  string
		status   int
		body     string
		wantErr  string
		wantCode string
		warned   string
	}{
		{"same version", api.Version, 200, `{"kernel": "6.1", "mechanisms": []}`, "", "", ""},
		{"other version warns", "9.9.9", 200, `{"kernel": "6.1", "mechanisms": []}`, "", "", "lanesd is version 9.9.9, this client is " + api.Version},
		{"API error", api.Version, 403, `{"error": "no", "code": "forbidden"}`, "no", api.CodeForbidden, ""},
		{"error that is not the API's", api.Version, 502, "bad gateway\n", "GET /v1/doctor: 502 Bad Gateway: bad gateway", api.CodeInternal, ""},
		{"undecodable answer", api.Version, 200, `{"kernel": 6}`, "GET /v1/doctor: decode response", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "s.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(api.VersionHeader, tc.version)
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			})}
			go srv.Serve(ln)
			defer srv.Close()
			var warnings []string
			c := client.New(sock)
			c.Warnf = func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) }
			for range 2 {
				r, err := c.Doctor(context.Background())
				switch {
				case tc.wantErr == "" && err != nil:
					t.Fatal(err)
				case tc.wantErr == "" && r.Kernel != "6.1":
					t.Errorf("kernel %q, want 6.1", r.Kernel)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || client.Code(err) != tc.wantCode):
					t.Errorf("got %v (code %q), want an error with %q (code %q)", err, client.Code(err), tc.wantErr, tc.wantCode)
				}
			}
			switch {
			case tc.warned == "" && len(warnings) > 0:
				t.Errorf("warned %q", warnings)
			case tc.warned != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.warned)):
				t.Errorf("warnings %q, want %q once", warnings, tc.warned)
			}
		})
	}
}

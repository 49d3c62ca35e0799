package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Listen opens the endpoint's listener: addr is "host:port" (TCP) or
// "unix:/path" (a Unix socket, mode 0644 so that any local user's
// Prometheus agent can read it; a stale socket file is replaced).
func Listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if fi, err := os.Lstat(path); err == nil {
			if fi.Mode()&os.ModeSocket == 0 {
				return nil, fmt.Errorf("metrics socket %s: exists and is not a socket", path)
			}
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("metrics socket %s: %w", path, err)
			}
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			ln.Close()
			return nil, fmt.Errorf("metrics socket %s: %w", path, err)
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return ln, nil
}

// Server serves a Set's handler on a listener until Close.
type Server struct {
	Addr string
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// Serve starts serving h (a Set's Handler) at addr under /metrics, with a
// short index page at /.
func Serve(addr string, h http.Handler, logf func(string, ...any)) (*Server, error) {
	ln, err := Listen(addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "lanesd metrics: GET /metrics")
	})
	s := &Server{Addr: addr, ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && logf != nil {
			logf("metrics %s: %v", addr, err)
		}
	}()
	return s, nil
}

// ListenAddr is the address the server listens on (the port chosen for
// ":0").
func (s *Server) ListenAddr() net.Addr { return s.ln.Addr() }

// Close stops the server (waiting up to a second for scrapes in flight)
// and removes its Unix socket.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	<-s.done
	if path, ok := strings.CutPrefix(s.Addr, "unix:"); ok {
		os.Remove(path)
	}
	return err
}

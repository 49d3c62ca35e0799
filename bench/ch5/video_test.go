package ch5

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAdapt(t *testing.T) {
	for _, tc := range []struct {
		name      string
		q         int
		fps, busy float64
		want      int
	}{
		{"on target with headroom rises", 50, 20, 0.3, 55},
		{"on target without headroom stays", 50, 20, 0.8, 50},
		{"19 stays", 50, 19.2, 0.3, 50},
		{"small shortfall drops at least 5", 100, 18.5, 0.9, 92},
		{"half rate halves", 100, 10, 0.9, 50},
		{"never below 1", 3, 0, 1, MinQuality},
		{"never above 100", 98, 20, 0.1, MaxQuality},
	} {
		if got := Adapt(tc.q, tc.fps, tc.busy); got != tc.want {
			t.Errorf("%s: Adapt(%d, %v, %v) = %d, want %d", tc.name, tc.q, tc.fps, tc.busy, got, tc.want)
		}
	}
}

func TestFeedback(t *testing.T) {
	b := putFeedback(nil, feedback{19.5, 0.25, 40})
	f, ok := parseFeedback(b)
	if !ok || f.fps != 19.5 || f.busy != 0.25 || f.quality != 40 {
		t.Fatalf("round trip: %+v %v", f, ok)
	}
	for _, bad := range [][]byte{nil, b[:10], append(append([]byte(nil), b...), 0), putFeedback(nil, feedback{-1, 0, 0}), putFeedback(nil, feedback{1e9, 0, 0}), putFeedback(nil, feedback{20, 0, 101})} {
		if _, ok := parseFeedback(bad); ok {
			t.Errorf("parsed %x", bad)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		role, arg, want string
	}{
		{"send", `{"to":"","duration":1000000000}`, "to: empty"},
		{"send", `{"to":"127.0.0.1:1","duration":0}`, "duration"},
		{"send", `{"to":"127.0.0.1:1","duration":1000000000,"quality":101}`, "quality 101"},
		{"send", `{"to":"127.0.0.1:1","duration":1000000000,"bogus":1}`, "unknown field"},
		{"recv", `{"listen":"127.0.0.1:1","duration":1000000000,"report_every":1000}`, "report_every"},
		{"recv", `{"listen":"127.0.0.1:1","duration":1000000000,"fps_min":21,"fps_max":19}`, "fps_min"},
		{"play", `{}`, "want send or recv"},
	} {
		err := VideoMain(context.Background(), tc.role, tc.arg, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: error %v, want one containing %q", tc.role, tc.arg, err, tc.want)
		}
	}
}

// fakeLanesd is an HTTP server on a Unix socket that speaks the wire
// format of lanesd's /v1/report and /v1/directives.
type fakeLanesd struct {
	mu      sync.Mutex
	reports []reportBody
	quality atomic.Int64
}

func (f *fakeLanesd) serve(t *testing.T) string {
	sock := filepath.Join(t.TempDir(), "lanes.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/report", func(w http.ResponseWriter, r *http.Request) {
		var b reportBody
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.reports = append(f.reports, b)
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/directives", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for i := 0; ; i++ {
			q := f.quality.Load()
			fmt.Fprintf(w, `{"seq":%d,"time":"2026-01-01T00:00:00Z","source":"controller.video","topic":"app.1.directive","payload":{"quality":%d}}`+"\n", i+1, q)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// TestVideoLoopback runs both ends on loopback for a few seconds: the
// receiver must display frames at about the target rate, report them,
// and the sender must follow a quality directive addressed to the
// receiver, which relays it.
func TestVideoLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 4 s")
	}
	fake := &fakeLanesd{}
	fake.quality.Store(30)
	sock := fake.serve(t)
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.LocalAddr().String()
	l.Close()
	start := time.Now().Add(200 * time.Millisecond).UnixNano()
	dur := 4 * time.Second
	var sout, rout bytes.Buffer
	var wg sync.WaitGroup
	var serr, rerr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		rerr = RunReceiver(context.Background(), ReceiverConfig{Listen: addr, Duration: dur + 300*time.Millisecond, Socket: sock, Directives: true, Start: start}, &rout)
	}()
	time.Sleep(100 * time.Millisecond)
	go func() {
		defer wg.Done()
		serr = RunSender(context.Background(), SenderConfig{To: addr, Duration: dur, Quality: 80, Start: start}, &sout)
	}()
	wg.Wait()
	if serr != nil || rerr != nil {
		t.Fatalf("sender: %v; receiver: %v", serr, rerr)
	}
	var rs []ReceiverSecond
	var ss []SenderSecond
	if err := decodeLines(&rout, &rs); err != nil {
		t.Fatal(err)
	}
	if err := decodeLines(&sout, &ss); err != nil {
		t.Fatal(err)
	}
	t.Logf("receiver: %+v", rs)
	t.Logf("sender: %+v", ss)
	full := 0
	for _, r := range rs {
		if r.T >= 1 && r.T <= 2 {
			if r.Frames < 15 || r.Frames > 22 {
				t.Errorf("second %d: %d frames displayed, want about %d", r.T, r.Frames, TargetFPS)
			}
			if r.PSNR < 25 {
				t.Errorf("second %d: PSNR %.1f", r.T, r.PSNR)
			}
			full++
		}
	}
	if full != 2 {
		t.Errorf("receiver seconds 1 and 2 missing: %+v", rs)
	}
	if last := ss[len(ss)-1]; last.Quality != 30 {
		t.Errorf("sender's quality at the end %.0f: want the directive's 30", last.Quality)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.reports) < 4 {
		t.Fatalf("%d reports: want one every 500 ms", len(fake.reports))
	}
	r := fake.reports[len(fake.reports)-1]
	if r.Metrics["fps"] < 15 || r.Targets["fps"]["min"] != 19 || r.Targets["fps"]["max"] != 21 {
		t.Errorf("last report %+v: want fps about 20 with target 19..21", r)
	}
}

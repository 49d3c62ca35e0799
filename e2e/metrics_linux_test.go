package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/procwatch"
)

// scraper reads lanesd's metrics endpoint at addr ("host:port" or
// "unix:/path").
type scraper struct {
	c   *http.Client
	url string
}

func newScraper(addr string) *scraper {
	s := &scraper{c: &http.Client{Timeout: 5 * time.Second}, url: "http://" + addr + "/metrics"}
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		s.c.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}
		s.url = "http://lanesd/metrics"
	}
	return s
}

func (s *scraper) scrape() (string, error) {
	resp, err := s.c.Get(s.url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", s.url, resp.Status, b)
	}
	return string(b), nil
}

// metricValue is the value of the sample series (a name with its labels
// as the text format writes them, in label-name order) in a scrape.
func metricValue(body, series string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// The metrics endpoint through a real lanesd: a capped lane's CPU time
// and throttling rise while a spinner runs in it, moves and refusals are
// counted with the API requests, a reload moves or stops the endpoint,
// and stop removes its socket.
func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "metrics.sock")
	cfg := func(metrics string) string {
		return "[daemon]\nmetrics = \"" + metrics + "\"\n\n[lanes.capped]\nunprivileged = false\ncpu = { cap = 20 }\n\n[lanes.spare]\n"
	}
	e := newEnv(t, cfg("unix:"+sock))
	user := testUser(t)
	e.start()
	sc := newScraper("unix:" + sock)

	spin := spawn(t, nil, "sh", "-c", "while :; do :; done")
	if r := e.lanes("move", strconv.Itoa(spin.Process.Pid), "capped"); r.code != 0 {
		t.Fatalf("move: %d %s", r.code, r.stderr)
	}
	mine := spawn(t, user, "sleep", "60")
	if r := e.lanesAs(user, "move", strconv.Itoa(mine.Process.Pid), "capped"); r.code == 0 {
		t.Fatalf("an unprivileged move into a root-only lane succeeded: %s", r.stdout)
	}

	// The spinner's CPU time and the cap's throttling rise between two
	// scrapes; the counts are exact.
	var first string
	waitFor(t, 10*time.Second, "a scrape with the capped lane's CPU time", func() bool {
		b, err := sc.scrape()
		if err != nil {
			t.Fatal(err)
		}
		v, ok := metricValue(b, `lanes_lane_cpu_usage_seconds_total{lane="capped"}`)
		first = b
		return ok && v > 0
	})
	exact := []struct {
		series string
		want   float64
	}{
		{`lanes_lane_processes{lane="capped"}`, 1},
		{`lanes_moves_total{lane="capped",result="moved"}`, 1},
		{`lanes_moves_total{lane="capped",result="refused"}`, 1},
		{`lanes_api_requests_total{code="200",route="/v1/move"}`, 1},
		{`lanes_api_requests_total{code="403",route="/v1/move"}`, 1},
		{`lanes_build_info{version="` + api.Version + `"}`, 1},
	}
	for _, x := range exact {
		if v, ok := metricValue(first, x.series); !ok || v != x.want {
			t.Errorf("%s = %v (present %v), want %v", x.series, v, ok, x.want)
		}
	}
	time.Sleep(time.Second)
	second, err := sc.scrape()
	if err != nil {
		t.Fatal(err)
	}
	rising := []string{`lanes_lane_cpu_usage_seconds_total{lane="capped"}`, `lanes_lane_cpu_cfs_throttled_periods_total{lane="capped"}`,
		`lanes_lane_cpu_cfs_throttled_seconds_total{lane="capped"}`}
	if _, err := os.Stat("/proc/pressure/cpu"); err == nil {
		rising = append(rising, `lanes_lane_pressure_cpu_waiting_seconds_total{lane="capped"}`)
	}
	for _, series := range rising {
		a, ok1 := metricValue(first, series)
		b, ok2 := metricValue(second, series)
		if !ok1 || !ok2 || b <= a {
			t.Errorf("%s: %v then %v (present %v, %v): want a rise", series, a, b, ok1, ok2)
		}
	}
	// A spinner capped at 20 % of the host's CPUs uses at most 0.2 s per
	// CPU a second (a loose check: what matters is that the counter is
	// the group's, in seconds, not microseconds or a whole CPU's).
	a, _ := metricValue(first, rising[0])
	b, _ := metricValue(second, rising[0])
	if d, most := b-a, 0.2*float64(numCPU(t))*1.5+0.1; d > most {
		t.Errorf("capped lane used %.2f s of CPU in about a second, want at most %.2f (a unit error?)", d, most)
	}

	// The processes are counted in the kernel where the BPF count loads,
	// and status says how; a lane with none counts 0, one with a few
	// counts each of them.
	var st api.Status
	e.lanesJSON(&st, "status")
	by := ""
	for _, m := range st.Mechanisms {
		if m.Resource == "metrics: processes per lane" {
			by = m.Backend
		}
	}
	if want := procwatch.ProbeCount() == nil; by == "" || strings.Contains(by, "BPF") != want {
		t.Errorf("status says the processes are counted by %q; BPF count loads here: %v", by, want)
	}
	var few []*exec.Cmd
	args := []string{"move"}
	for range 3 {
		c := spawn(t, nil, "sleep", "60")
		few, args = append(few, c), append(args, strconv.Itoa(c.Process.Pid))
	}
	if r := e.lanes(append(args, "spare")...); r.code != 0 {
		t.Fatalf("move: %d %s", r.code, r.stderr)
	}
	if v, ok := metricValue(first, `lanes_lane_processes{lane="spare"}`); !ok || v != 0 {
		t.Errorf("an empty lane's processes: %v (present %v), want 0", v, ok)
	}
	if b, err := sc.scrape(); err != nil {
		t.Fatal(err)
	} else if v, _ := metricValue(b, `lanes_lane_processes{lane="spare"}`); v != 3 {
		t.Errorf("a lane with three processes: %v", v)
	}
	// A lane whose group is removed under lanesd is no longer reported,
	// and the scrape still answers.
	for _, c := range few {
		c.Process.Kill()
		c.Wait()
	}
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the spare lane's group removed", func() bool {
		for _, d := range h.LaneGroup("spare").Dirs() {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				return false
			}
		}
		return true
	})
	after, err := sc.scrape()
	if err != nil {
		t.Fatalf("a scrape after a lane's group was removed: %v", err)
	}
	if v, ok := metricValue(after, `lanes_lane_processes{lane="spare"}`); ok {
		t.Errorf("a removed group's lane still reported: %v processes", v)
	}
	// A reload with no metrics stops the endpoint; one with a TCP address
	// starts it there.
	e.writeConfig(cfg(""))
	if r := e.lanes("reload"); r.code != 0 {
		t.Fatalf("reload: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("metrics socket after a reload without metrics: %v", err)
	}
	port := freePort(t)
	e.writeConfig(cfg("127.0.0.1:" + port))
	if r := e.lanes("reload"); r.code != 0 {
		t.Fatalf("reload: %d %s", r.code, r.stderr)
	}
	body, err := newScraper("127.0.0.1:" + port).scrape()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := metricValue(body, `lanes_moves_total{lane="capped",result="moved"}`); !ok || v != 1 {
		t.Errorf("after reloads the counters ran on: moves %v (present %v), want 1", v, ok)
	}
	// An address in use is a health entry, not a failed reload.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	e.writeConfig(cfg(ln.Addr().String()))
	if r := e.lanes("reload"); r.code != 0 {
		t.Fatalf("reload: %d %s", r.code, r.stderr)
	}
	if r := e.lanes("status"); !strings.Contains(r.stdout, "metrics") || !strings.Contains(r.stdout, "address already in use") {
		t.Errorf("status does not say the metrics address is taken:\n%s", r.stdout)
	}
	e.writeConfig(cfg("unix:" + sock))
	if r := e.lanes("reload"); r.code != 0 {
		t.Fatalf("reload: %d %s", r.code, r.stderr)
	}
	if _, err := sc.scrape(); err != nil {
		t.Errorf("back on the Unix socket: %v", err)
	}
	e.stop()
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("metrics socket after stop: %v", err)
	}
}

// freePort is a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

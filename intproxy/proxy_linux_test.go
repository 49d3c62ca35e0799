package intproxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/net/proxy"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/intnw"
	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/netns"
)

const ms = time.Millisecond

// bed is the two-path testbed with a multi-socket between its ends, the
// server end of the proxy and an HTTP server in the destination, and the
// client end in the source.
type bed struct {
	topo   *netns.Topology
	client *Client
	socks  string // the SOCKS5 listener's address, in the source
	web    netip.AddrPort
	paths  []intnw.Path

	mu     sync.Mutex
	labels []string // "lane=label" of each local connection labelled
}

// blob is n deterministic bytes.
func blob(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// newBed builds the bed; mk, if not nil, makes the client end's labeler
// for the topology.
func newBed(t *testing.T, mk func(*netns.Topology) Labeler, links ...linkem.Config) *bed {
	t.Helper()
	testutil.RequireRoot(t)
	topo, err := netns.New(len(links), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Error(err)
		}
	})
	for i, cfg := range links {
		em, err := linkem.Start(topo.Paths[i].TunUp, topo.Paths[i].TunDown, linkem.Options{Up: cfg, Down: cfg, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { em.Stop() })
	}
	b := &bed{topo: topo, web: netip.AddrPortFrom(topo.Paths[0].DstAddr, 8080)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	// The destination: an HTTP server that sends /blob?n=N and answers a
	// POST with the hash of its body, saying whom it saw.
	var webLn net.Listener
	if err := netns.Do(topo.Dst, func() (err error) { webLn, err = net.Listen("tcp", ":8080"); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Remote", r.RemoteAddr)
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			fmt.Fprint(w, sum(body))
			return
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		_, _ = w.Write(blob(n))
	})}
	go srv.Serve(webLn)
	t.Cleanup(func() { srv.Close() })

	// The server end: allowed is the destination's side of the testbed
	// (198.18.20.0/22), port 8080 and 8081 (where nothing listens).
	lis, err := intnw.Listen(":7200", &intnw.Options{Namespace: "/run/netns/" + topo.Dst})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	allow, _ := ParseRule("198.18.20.0/22:8080-8081")
	server := &Server{Allow: []Rule{allow}, Namespace: "/run/netns/" + topo.Dst, Options: Options{Logf: prefixed(t, "server")}}
	go server.Serve(ctx, lis)

	for i, p := range topo.Paths {
		b.paths = append(b.paths, intnw.Path{Name: fmt.Sprintf("net%d", i), Local: p.SrcAddr,
			Remote: netip.AddrPortFrom(p.DstAddr, 7200), Bandwidth: float64(links[i].Rate)})
	}
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	conn, err := intnw.Dial(dctx, b.paths, &intnw.Options{Namespace: "/run/netns/" + topo.Src})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(time.Second) })
	label := func(net.Conn, netip.AddrPort) (string, intnw.Label) { return "", intnw.FGLarge }
	if mk != nil {
		label = mk(topo)
	}
	rec := func(c net.Conn, dst netip.AddrPort) (string, intnw.Label) {
		lane, l := label(c, dst)
		b.mu.Lock()
		b.labels = append(b.labels, lane+"="+l.String())
		b.mu.Unlock()
		return lane, l
	}
	b.client = NewClient(ctx, conn, rec, Options{Logf: prefixed(t, "client")})
	var ln net.Listener
	if err := netns.Do(topo.Src, func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	b.socks = ln.Addr().String()
	go b.client.ServeSOCKS(ln)
	t.Cleanup(func() { ln.Close() })
	return b
}

func prefixed(t *testing.T, who string) func(string, ...any) {
	return func(f string, a ...any) { t.Logf(who+": "+f, a...) }
}

// httpClient reaches the destination through the SOCKS5 listener, from
// the source namespace.
func (b *bed) httpClient(t *testing.T) *http.Client {
	d, err := proxy.SOCKS5("tcp", b.socks, nil, &net.Dialer{})
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = netns.Do(b.topo.Src, func() (err error) { c, err = d.Dial(network, addr); return err })
			return c, err
		}}}
}

func getBlob(hc *http.Client, url string, n int) error {
	resp, err := hc.Get(fmt.Sprintf("%s/blob?n=%d", url, n))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read %d of %d bytes: %w", len(got), n, err)
	}
	if sum(got) != sum(blob(n)) {
		return fmt.Errorf("%d bytes received, %d sent: the hashes differ", len(got), n)
	}
	return nil
}

func postBlob(hc *http.Client, url string, n int) error {
	resp, err := hc.Post(url+"/sum", "application/octet-stream", strings.NewReader(string(blob(n))))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if string(got) != sum(blob(n)) {
		return fmt.Errorf("the server hashed %d bytes as %s, want %s", n, got, sum(blob(n)))
	}
	return nil
}

// Local connections through SOCKS5 are carried both ways over the two
// paths byte for byte, several at once; a destination outside the
// allow-list is refused with SOCKS5's "not allowed" and one where nothing
// listens with "refused", and the multi-socket carries on; one path's
// device deleted mid-transfer loses nothing.
func TestSOCKS(t *testing.T) {
	link := linkem.Config{Rate: 10_000_000, Delay: 10 * ms, QueuePackets: 200}
	b := newBed(t, nil, link, link)
	hc := b.httpClient(t)
	url := "http://" + b.web.String()

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 4 {
		wg.Add(2)
		go func() { defer wg.Done(); errs <- getBlob(hc, url, 300_000+i) }()
		go func() { defer wg.Done(); errs <- postBlob(hc, url, 200_000+i) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	for _, tc := range []struct{ dest, want string }{
		{"198.18.30.1:8080", "not allowed"},
		{netip.AddrPortFrom(b.web.Addr(), 9999).String(), "not allowed"},
		{netip.AddrPortFrom(b.web.Addr(), 8081).String(), "refused"},
	} {
		_, err := hc.Get("http://" + tc.dest + "/blob?n=1")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("GET %s: %v, want an error saying %q", tc.dest, err, tc.want)
		}
	}
	if err := getBlob(hc, url, 1000); err != nil {
		t.Fatalf("after the refusals: %v", err)
	}

	// A path vanishes during a download.
	done := make(chan error, 1)
	go func() { done <- getBlob(hc, url, 3_000_000) }()
	time.Sleep(700 * ms)
	if out, err := exec.Command("ip", "-n", b.topo.Src, "link", "del", b.topo.Paths[1].SrcDev).CombinedOutput(); err != nil {
		t.Fatalf("delete %s: %v: %s", b.topo.Paths[1].SrcDev, err, out)
	}
	if err := <-done; err != nil {
		t.Errorf("download across the path's deletion: %v", err)
	}
	// Every stream is gone once its connection closed.
	for end := time.Now().Add(5 * time.Second); b.client.Streams() != 0; time.Sleep(20 * ms) {
		if time.Now().After(end) {
			t.Errorf("%d streams left after every connection closed", b.client.Streams())
			break
		}
	}
}

// Connections redirected by the nftables rules Redirect installs reach
// their destination through the proxy (the destination sees the server
// end connect, not the source), and the rules are removed after, also
// when a crashed proxy left them.
func TestTransparent(t *testing.T) {
	requireTools(t, "curl", "nsenter")
	link := linkem.Config{Rate: 10_000_000, Delay: 5 * ms, QueuePackets: 200}
	b := newBed(t, nil, link, link)
	var ln net.Listener
	if err := netns.Do(b.topo.Src, func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go b.client.ServeTransparent(ln)
	port := uint16(addrPortOf(ln.Addr()).Port())
	rule, _ := ParseRule("198.18.20.0/22")
	var skip []netip.AddrPort
	for _, p := range b.paths {
		skip = append(skip, p.Remote)
	}
	var undo func() error
	install := func() {
		t.Helper()
		if err := netns.Do(b.topo.Src, func() (err error) { undo, err = Redirect(port, []Rule{rule}, skip); return err }); err != nil {
			t.Fatal(err)
		}
	}
	install()
	install() // as after a crash: the first tables are replaced
	if n := b.tables(t, port); n != 1 {
		t.Fatalf("%d tables named %s, want 1", n, RedirectTable(port))
	}

	want := sum(blob(500_000))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := netns.Command(ctx, b.topo.Src, "curl", "-sS", "-D", "/dev/stderr", fmt.Sprintf("http://%v/blob?n=500000", b.web)).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("curl: %v: %s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	if sum(out) != want {
		t.Errorf("curl received %d bytes, not the 500000 sent", len(out))
	}
	// The destination saw the server end: a connection from its own side.
	resp, err := netns.Command(ctx, b.topo.Src, "curl", "-sS", "-o", "/dev/null", "-w", "%header{x-remote}", fmt.Sprintf("http://%v/blob?n=1", b.web)).Output()
	if err != nil {
		t.Fatal(err)
	}
	remote, err := netip.ParseAddrPort(strings.TrimSpace(string(resp)))
	if err != nil {
		t.Fatalf("X-Remote %q: %v", resp, err)
	}
	for _, p := range b.topo.Paths {
		if remote.Addr() == p.SrcAddr {
			t.Errorf("the destination saw %v, the source's own address: not redirected", remote)
		}
	}
	if err := netns.Do(b.topo.Src, undo); err != nil {
		t.Fatal(err)
	}
	if n := b.tables(t, port); n != 0 {
		t.Errorf("%d tables left after undo", n)
	}
	// Without the rules, the transparent listener refuses a connection
	// made to it directly (nothing was redirected).
	out, err = netns.Command(ctx, b.topo.Src, "curl", "-sS", "--max-time", "5", "http://"+ln.Addr().String()+"/").CombinedOutput()
	if err == nil {
		t.Errorf("a direct connection to the transparent listener was carried: %s", out)
	}
}

// tables counts the redirect tables of port in the source namespace.
func (b *bed) tables(t *testing.T, port uint16) int {
	t.Helper()
	n := 0
	err := netns.Do(b.topo.Src, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		ts, err := c.ListTables()
		if err != nil {
			return err
		}
		for _, tb := range ts {
			if tb.Name == RedirectTable(port) {
				n++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Each local connection is labelled from the lane of the process that
// opened it: curl run in a lanes group of an interactive-like lane is
// foreground small, in a background-like one background large, and the
// test itself, in no lane, the default.
func TestLaneLabels(t *testing.T) {
	requireTools(t, "curl", "nsenter")
	testutil.RequireRoot(t)
	h, err := cgroup.Detect()
	if err != nil || h.V2Root == "" {
		t.Skipf("no cgroup v2 hierarchy (%v)", err)
	}
	ia, bg := fmt.Sprintf("ptest%dia", os.Getpid()), fmt.Sprintf("ptest%dbg", os.Getpid())
	ll := &LaneLabeler{Labels: map[string]intnw.Label{ia: intnw.FGSmall, bg: intnw.BGLarge}, Default: intnw.FGLarge, Logf: t.Logf}
	b := newBed(t, func(topo *netns.Topology) Labeler {
		ll.Namespace = "/run/netns/" + topo.Src
		return ll.Label
	}, linkem.Config{Rate: 10_000_000, Delay: 5 * ms, QueuePackets: 200})
	for _, lane := range []string{ia, bg} {
		dir := filepath.Join(h.V2Root, cgroup.Prefix+lane)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for end := time.Now().Add(5 * time.Second); os.Remove(dir) != nil && time.Now().Before(end); {
				time.Sleep(50 * ms)
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := netns.Command(ctx, b.topo.Src, "sh", "-c", `echo $$ > "$1/cgroup.procs" && exec curl -sS --socks5 "$2" "$3"`,
			"sh", dir, b.socks, fmt.Sprintf("http://%v/blob?n=1000", b.web)).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("curl in lane %s: %v: %s", lane, err, out)
		}
		if sum(out) != sum(blob(1000)) {
			t.Errorf("curl in lane %s: %d bytes, not the 1000 sent", lane, len(out))
		}
	}
	if err := getBlob(b.httpClient(t), "http://"+b.web.String(), 10); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	got := strings.Join(b.labels, " ")
	b.mu.Unlock()
	if want := ia + "=fg-small " + bg + "=bg-large =fg-large"; got != want {
		t.Errorf("labels %q, want %q", got, want)
	}
}

// A peer that does not speak the protocol (a message that does not parse:
// here an open with a label out of range) ends the multi-socket at the
// server end, which says why.
func TestBadPeer(t *testing.T) {
	testutil.RequireRoot(t)
	link := linkem.Config{Rate: 10_000_000, Delay: 5 * ms, QueuePackets: 200}
	b := newBed(t, nil, link)
	conn, err := intnw.Dial(context.Background(), b.paths, &intnw.Options{Namespace: "/run/netns/" + b.topo.Src})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(time.Second)
	bad := (&msg{kind: kOpen, stream: 1, dest: Dest{Addr: b.web.Addr(), Port: 8080}}).encode()
	bad[5] = 7 // the label
	if _, err := conn.Send(intnw.FGSmall, bad, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-conn.Done():
		t.Logf("the server end closed the multi-socket: %v", conn.Err())
	case <-time.After(10 * time.Second):
		t.Fatal("the server end kept a multi-socket whose peer sent a label out of range")
	}
}

// requireTools fails the test when a tool it drives is missing
// (scripts/test installs them).
func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/test installs it): %v", tool, err)
		}
	}
}

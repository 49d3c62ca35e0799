package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/netns"
)

// proc is a long-running lanes command and what it printed.
type proc struct {
	cmd *exec.Cmd
	out *syncBuf
}

func (e *env) startLanesIn(ns string, args ...string) *proc {
	e.t.Helper()
	p := &proc{out: &syncBuf{}}
	p.cmd = netns.Command(context.Background(), ns, e.bin, append([]string{"--socket", e.socket}, args...)...)
	p.cmd.Env = append(os.Environ(), roleEnv+"=lanes")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

// stop ends p with SIGTERM and returns its exit error.
func (p *proc) stop(t *testing.T) error {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-done
		return fmt.Errorf("did not stop within 15 s of SIGTERM")
	}
}

// `lanes proxy` end to end, as a user runs it: the server end in one
// namespace, the client end in the other over two emulated networks with
// SOCKS5 and a transparent listener whose redirect rules it installs;
// curl through both (content checked), curl under `lanes run -l
// background` labelled from its lane, the paths reported to lanesd as
// the client's metrics, and on SIGTERM the rules removed.
func TestProxyCommands(t *testing.T) {
	e := newEnv(t, "")
	for _, tool := range []string{"curl", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/test installs it)", tool)
		}
	}
	// Bad input: no allow-list, no path, no time to dial.
	for _, args := range [][]string{
		{"proxy", "server"},
		{"proxy", "client", "--socks", "127.0.0.1:0"},
		{"proxy", "client", "--socks", "127.0.0.1:0", "--path", "to=198.18.0.1:7300", "--dial-timeout", "0s"},
	} {
		if r := e.lanes(args...); r.code != 2 {
			t.Errorf("lanes %v: exit %d, want 2: %s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	e.start()
	defer e.stop()

	topo, err := netns.New(2, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Error(err)
		}
	})
	link := linkem.Config{Rate: 10_000_000, Delay: 10 * time.Millisecond, QueuePackets: 200}
	for _, p := range topo.Paths {
		em, err := linkem.Start(p.TunUp, p.TunDown, linkem.Options{Up: link, Down: link, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { em.Stop() })
	}
	body := bytes.Repeat([]byte("lanes proxy "), 100_000)
	want := sha256.Sum256(body)
	var ln net.Listener
	if err := netns.Do(topo.Dst, func() (err error) { ln, err = net.Listen("tcp", ":8080"); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) })}
	go srv.Serve(ln)
	defer srv.Close()
	web := fmt.Sprintf("http://%v:8080/", topo.Paths[0].DstAddr)

	// Under emulation (the kernel matrix) a start takes many times longer.
	slow := time.Duration(1)
	if testutil.Emulated() {
		slow = 5
	}
	server := e.startLanesIn(topo.Dst, "proxy", "server", "--listen", ":7300", "--allow", topo.Paths[0].DstAddr.String()+":8080")
	client := e.startLanesIn(topo.Src, "proxy", "client",
		"--path", fmt.Sprintf("name=net0,from=%v,to=%v:7300", topo.Paths[0].SrcAddr, topo.Paths[0].DstAddr),
		"--path", fmt.Sprintf("name=net1,from=%v,to=%v:7300", topo.Paths[1].SrcAddr, topo.Paths[1].DstAddr),
		"--socks", "127.0.0.1:1080", "--transparent", "127.0.0.1:1081",
		"--redirect", topo.Paths[0].DstAddr.String()+"/32:8080", "--status-every", "1s",
		"--dial-timeout", (slow * 15 * time.Second).String())
	// The client end ends at once when it cannot reach the server end
	// within its dial timeout: no use waiting for it then.
	for deadline := time.Now().Add(slow * 20 * time.Second); !strings.Contains(client.out.String(), "transparent on"); time.Sleep(10 * time.Millisecond) {
		if st := procState(client.cmd.Process.Pid); st == "Z" || st == "" || time.Now().After(deadline) {
			t.Fatalf("no transparent listener from the client end (process state %q)\nclient end:\n%s\nserver end:\n%s", st, client.out.String(), server.out.String())
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), slow*60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"redirected", []string{"curl", "-sS", web}},
		{"socks5", []string{"curl", "-sS", "--socks5", "127.0.0.1:1080", web}},
		{"background lane", []string{e.bin, "--socket", e.socket, "run", "-l", "background", "--", "curl", "-sS", "--socks5", "127.0.0.1:1080", web}},
	} {
		c := netns.Command(ctx, topo.Src, tc.args[0], tc.args[1:]...)
		c.Env = append(os.Environ(), roleEnv+"=lanes", nextRoleEnv+"=")
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%s: %v: %s\nclient end:\n%s", tc.name, err, stderr.String(), client.out.String())
		}
		if sha256.Sum256(out) != want {
			t.Errorf("%s: %d bytes, not the %d the server sent", tc.name, len(out), len(body))
		}
	}
	log := client.out.String()
	if !strings.Contains(log, `(lane "background", bg-large)`) {
		t.Errorf("no connection labelled from the background lane in the client end's log:\n%s", log)
	}
	if !strings.Contains(log, "redirected from") {
		t.Errorf("no redirected connection in the client end's log:\n%s", log)
	}
	// Refused: a destination outside the server end's allow-list.
	c := netns.Command(ctx, topo.Src, "curl", "-sS", "--socks5", "127.0.0.1:1080", fmt.Sprintf("http://%v:8081/", topo.Paths[0].DstAddr))
	if out, err := c.CombinedOutput(); err == nil {
		t.Errorf("a destination outside the allow-list was reached: %s", out)
	}

	// The paths as the client's metrics, on lanesd's event channel.
	waitFor(t, slow*10*time.Second, "a report of the paths", func() bool {
		r := e.lanes("events", "--json", "--topic", "app.*.report", "--since", "30s")
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var ev struct {
				Payload map[string]any `json:"payload"`
			}
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Payload["path_net0_up"] == 1.0 && ev.Payload["path_net1_up"] == 1.0 {
				return true
			}
		}
		return false
	})

	// And in lanes status, as the client end's last report.
	var st api.Status
	e.lanesJSON(&st, "status")
	found := false
	for _, r := range st.Reports {
		// nsenter execs lanes: the client end has the command's pid.
		if r.PID == client.cmd.Process.Pid {
			found = r.Metrics["path_net0_up"] == 1 && r.Metrics["path_net1_up"] == 1 && r.Metrics["path_net0_rtt_ms"] > 0
		}
	}
	if !found {
		t.Errorf("lanes status has no report of the paths: %+v", st.Reports)
	}
	if r := e.lanes("status"); !strings.Contains(r.stdout, "path_net0_up=1") {
		t.Errorf("lanes status does not print the paths' report:\n%s", r.stdout)
	}

	if err := client.stop(t); err != nil {
		t.Errorf("client end: %v\n%s", err, client.out.String())
	}
	if err := server.stop(t); err != nil {
		t.Errorf("server end: %v\n%s", err, server.out.String())
	}
	// The redirect rules went with the client end.
	err = netns.Do(topo.Src, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		ts, err := c.ListTables()
		if err != nil {
			return err
		}
		for _, tb := range ts {
			if strings.HasPrefix(tb.Name, "lanes_proxy") {
				t.Errorf("table %s left after the client end stopped", tb.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

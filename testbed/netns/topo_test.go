//go:build linux

package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// forward copies packets from one TUN to the other until ctx ends: the
// smallest possible "emulator", enough to check the routing.
func forward(ctx context.Context, t *testing.T, from, to *os.File) {
	go func() {
		buf := make([]byte, 65536)
		for ctx.Err() == nil {
			n, err := from.Read(buf)
			if err != nil {
				return
			}
			if _, err := to.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
}

func nsExists(name string) bool {
	_, err := os.Stat(filepath.Join(netnsDir, name))
	return err == nil
}

func TestTopology(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tc := range []struct {
		name  string
		paths int
	}{{"line", 1}, {"two-path", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := New(tc.paths, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { topo.Close() })
			names := topo.Namespaces()
			if len(names) != 2+tc.paths {
				t.Fatalf("namespaces %v, want %d", names, 2+tc.paths)
			}
			for _, n := range names {
				if !nsExists(n) {
					t.Fatalf("namespace %s missing", n)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Before packets are forwarded between the TUNs, dst is unreachable.
			p0 := topo.Paths[0]
			if err := udpExchange(topo, p0, 300*time.Millisecond); err == nil {
				t.Fatalf("udp from src to dst arrived without forwarding between the TUNs")
			}
			for _, p := range topo.Paths {
				forward(ctx, t, p.TunUp, p.TunDown)
				forward(ctx, t, p.TunDown, p.TunUp)
			}
			for i, p := range topo.Paths {
				if err := udpExchange(topo, p, 2*time.Second); err != nil {
					t.Fatalf("path %d: %v", i, err)
				}
			}
			if err := topo.Close(); err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				if nsExists(n) {
					t.Errorf("namespace %s left after Close", n)
				}
			}
			out, err := exec2("ip", "-o", "link")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, topo.Prefix) {
				t.Errorf("links with prefix %s left in the root namespace:\n%s", topo.Prefix, out)
			}
		})
	}
}

// udpExchange sends a datagram from src to dst on path p, checks that it
// arrives from src's address on that path, and that dst's answer arrives
// back at src.
func udpExchange(topo *Topology, p *Path, timeout time.Duration) error {
	var srv, cli *net.UDPConn
	err := Do(topo.Dst, func() (err error) {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.DstAddr.AsSlice(), Port: 9000})
		return err
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	err = Do(topo.Src, func() (err error) {
		cli, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: p.DstAddr.AsSlice(), Port: 9000})
		return err
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	// A token tells this exchange's datagram from one queued by an
	// earlier exchange.
	token := fmt.Sprintf("hello %d", time.Now().UnixNano())
	if _, err := cli.Write([]byte(token)); err != nil {
		return err
	}
	srv.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 100)
	var from *net.UDPAddr
	for {
		n, f, err := srv.ReadFromUDP(buf)
		if err != nil {
			return fmt.Errorf("udp via %s: %w", p.Router, err)
		}
		if string(buf[:n]) == token {
			from = f
			break
		}
	}
	if !from.IP.Equal(p.SrcAddr.AsSlice()) {
		return fmt.Errorf("datagram from %v, want from %v", from, p.SrcAddr)
	}
	if _, err := srv.WriteToUDP([]byte("back"), from); err != nil {
		return err
	}
	cli.SetReadDeadline(time.Now().Add(timeout))
	n, err := cli.Read(buf)
	if err != nil || string(buf[:n]) != "back" {
		return fmt.Errorf("answer via %s: %q, %v", p.Router, buf[:n], err)
	}
	return nil
}

func TestSweep(t *testing.T) {
	testutil.RequireRoot(t)
	// A leftover of a crashed run: a namespace named like ours but for a
	// pid that does not exist, with a process still inside.
	name := "lt4194999_1r0" // above pid_max's default, so never a live pid
	if alive(4194999) {
		t.Fatalf("pid 4194999 is alive; pick another for the test")
	}
	if err := createNS(name, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeNS(name, t.Logf) })
	sleep := Command(context.Background(), name, "sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleep.Wait() }()
	// A live run's namespace must survive the sweep.
	topo, err := New(1, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topo.Close() })

	if err := Sweep(t.Logf); err != nil {
		t.Fatal(err)
	}
	if nsExists(name) {
		t.Errorf("leftover namespace %s not swept", name)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Errorf("process in the leftover namespace not killed")
		sleep.Process.Kill()
	}
	for _, n := range topo.Namespaces() {
		if !nsExists(n) {
			t.Errorf("live namespace %s swept", n)
		}
	}
}

func exec2(name string, args ...string) (string, error) {
	out, err := execCommand(name, args...).CombinedOutput()
	return string(out), err
}

var execCommand = exec.Command

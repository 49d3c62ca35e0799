package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/bench/execspeed"
	"github.com/lanes-qos/lanes/cmd/lanes/cli"
	"github.com/lanes-qos/lanes/cmd/lanes/proxycmd"
	"github.com/lanes-qos/lanes/daemon"
)

// roleEnv makes the test binary act as lanes or lanesd.
const roleEnv = "LANES_E2E_ROLE"

// nextRoleEnv, if set, is the role of the programs a role execs (lanes run
// execs its command, which may be this binary again).
const nextRoleEnv = "LANES_E2E_NEXT"

func TestMain(m *testing.M) {
	role := os.Getenv(roleEnv)
	if next := os.Getenv(nextRoleEnv); next != "" {
		os.Setenv(roleEnv, next)
		os.Unsetenv(nextRoleEnv)
	}
	switch role {
	case "lanes":
		os.Exit(cli.Run(os.Args[1:], cli.Options{Extra: []*cobra.Command{proxycmd.New()}}))
	case "lanesd":
		os.Exit(daemon.Main(os.Args[1:], os.Stdout, os.Stderr))
	case "spin":
		// A busy loop, bounded: the CPU tests' workload.
		spin()
		os.Exit(0)
	case "cpusend":
		// A CPU-bound UDP sender: ADDR WORK SECONDS.
		work, _ := strconv.Atoi(os.Args[2])
		secs, _ := strconv.Atoi(os.Args[3])
		_, err := execspeed.Send(context.Background(), execspeed.SendOptions{Addr: os.Args[1], Work: work, Duration: time.Duration(min(max(secs, 1), 300)) * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, "cpusend:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "udpsink":
		// Receives and drops datagrams: ADDR SECONDS.
		secs, _ := strconv.Atoi(os.Args[2])
		if _, err := execspeed.Receive(context.Background(), os.Args[1], time.Duration(min(max(secs, 1), 300))*time.Second, false); err != nil {
			fmt.Fprintln(os.Stderr, "udpsink:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "sleep":
		// A process that waits, whatever the host's sleep is (busybox in
		// the kernel-matrix VMs, where a renamed copy would not run).
		secs, _ := strconv.Atoi(os.Args[len(os.Args)-1])
		time.Sleep(time.Duration(min(max(secs, 1), 120)) * time.Second)
		os.Exit(0)
	case "suid-sleep":
		// Run from a setuid-root copy of this binary: "euid" keeps the
		// caller's real uid (effective uid 0), "root" becomes root fully.
		if len(os.Args) > 1 && os.Args[1] == "root" {
			if err := becomeRoot(); err != nil {
				fmt.Fprintln(os.Stderr, "setresuid:", err)
				os.Exit(1)
			}
		}
		time.Sleep(60 * time.Second)
		os.Exit(0)
	case "post":
		// POST SOCKET ROUTE BODY: one raw request to lanesd, as whoever
		// runs it; prints the HTTP status and the body.
		os.Exit(post(os.Args[1], os.Args[2], os.Args[3]))
	case "":
	default:
		fmt.Fprintf(os.Stderr, "unknown %s\n", roleEnv)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func post(socket, route, body string) int {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	resp, err := hc.Post("http://lanesd"+route, "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s", resp.StatusCode, b)
	return 0
}

// spin burns CPU for LANES_SPIN_SECONDS (default 10) on several threads of
// the Go runtime's choosing; with LANES_SPIN_FORK_AFTER=N it starts a child
// (sleep) after N seconds.
func spin() {
	secs, _ := strconv.Atoi(os.Getenv("LANES_SPIN_SECONDS"))
	if secs <= 0 || secs > 60 {
		secs = 10
	}
	end := time.Now().Add(time.Duration(secs) * time.Second)
	if after, err := strconv.Atoi(os.Getenv("LANES_SPIN_FORK_AFTER")); err == nil {
		go func() {
			time.Sleep(time.Duration(after) * time.Second)
			c := exec.Command(os.Args[0], strconv.Itoa(secs))
			c.Env = append(os.Environ(), roleEnv+"=sleep")
			if c.Start() == nil {
				c.Wait()
			}
		}()
	}
	x := 0
	for time.Now().Before(end) {
		for i := 0; i < 1000000; i++ {
			x += i
		}
	}
	_ = x
}

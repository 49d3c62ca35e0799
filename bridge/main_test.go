package bridge

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// serverEnv, when set to host:port, makes the test binary a NATS server
// on that address (run inside a network namespace by the tests) until its
// standard input closes.
const serverEnv = "LANES_BRIDGE_TEST_NATS"

func TestMain(m *testing.M) {
	if addr := os.Getenv(serverEnv); addr != "" {
		if err := runServer(addr); err != nil {
			fmt.Fprintln(os.Stderr, "nats server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runServer(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	s, err := server.NewServer(&server.Options{Host: host, Port: p, NoLog: true, NoSigs: true, MaxPayload: 1 << 20})
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("not listening on %s after 10s", addr)
	}
	fmt.Println("ready")
	// Until the parent closes our stdin (or dies).
	bufio.NewReader(os.Stdin).ReadString('\n')
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

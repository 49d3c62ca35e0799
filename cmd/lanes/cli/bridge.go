package cli

import (
	"fmt"

	"github.com/lanes-qos/lanes/api"
)

// printBridge prints the NATS bridge's line of `lanes status`.
func printBridge(b *api.Bridge) {
	state := "not connected"
	if b.Connected {
		state = "connected to " + b.Server
	}
	fmt.Fprintf(Stdout, "bridge:  %s as host %s, %s (reconnects %d)\n", b.URL, b.Host, state, b.Reconnects)
	fmt.Fprintf(Stdout, "         out: %d sent, %d buffered, %d lost, %d expired; in: %d received, %d refused, %d filtered, %d dropped\n",
		b.Sent, b.Buffered, b.Lost, b.Expired, b.Received, b.Refused, b.Filtered, b.Dropped)
	if b.LastError != "" {
		fmt.Fprintf(Stdout, "         last error: %s\n", b.LastError)
	}
}

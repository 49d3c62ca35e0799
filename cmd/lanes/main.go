// Command lanes is the lanes CLI: run and move work into lanes, see what
// lanesd does, and run the benchmarks. See `lanes --help`.
package main

import (
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/cmd/lanes/benchcmd"
	"github.com/lanes-qos/lanes/cmd/lanes/cli"
	"github.com/lanes-qos/lanes/cmd/lanes/proxycmd"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/netprobe"
	"github.com/lanes-qos/lanes/intproxy"
)

// init keeps main on the process's first thread, so that lanes run's exec
// comes from it: an exec from another thread makes the kernel report the
// first thread's exit under the process's PID, as if the command had
// exited.
func init() { runtime.LockOSThread() }

// proxyProbes are lanes proxy's mechanisms for `lanes doctor`.
func proxyProbes() ([]features.Mechanism, error) { return intproxy.Mechanisms(), nil }

func main() {
	os.Exit(cli.Run(os.Args[1:], cli.Options{
		Extra:       []*cobra.Command{benchcmd.New(), proxycmd.New()},
		LocalProbes: []func() ([]features.Mechanism, error){netprobe.Doctor, proxyProbes},
	}))
}

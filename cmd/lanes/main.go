// Command lanes is the lanes CLI: run and move work into lanes, see what
// lanesd does, and run the benchmarks. See `lanes --help`.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/cmd/lanes/benchcmd"
	"github.com/lanes-qos/lanes/cmd/lanes/cli"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/netprobe"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], cli.Options{
		Extra:       []*cobra.Command{benchcmd.New()},
		LocalProbes: []func() ([]features.Mechanism, error){netprobe.Doctor},
	}))
}

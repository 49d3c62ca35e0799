// Command lanes is the lanes CLI: run and move work into lanes, see what
// lanesd does, and run the benchmarks. See `lanes --help`.
package main

import (
	"os"

	"github.com/lanes-qos/lanes/internal/cli"
	"github.com/lanes-qos/lanes/internal/cli/benchcmd"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], benchcmd.New()))
}

// Command lanes is the lanes CLI: run and move work into lanes, and see
// what lanesd does. See `lanes --help`.
package main

import (
	"os"

	"github.com/lanes-qos/lanes/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:]))
}

// Command lanesd is the lanes daemon: it owns every kernel setting lanes
// makes and serves the local API. See `lanesd --help`.
package main

import (
	"os"

	"github.com/lanes-qos/lanes/daemon"
)

func main() {
	os.Exit(daemon.Main(os.Args[1:], os.Stdout, os.Stderr))
}

// Command lanesd is the lanes daemon: it owns every kernel setting lanes
// makes and serves the local API. See `lanesd --help`.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/lanes-qos/lanes/daemon"
)

func main() {
	var opts daemon.Options
	cleanup := flag.Bool("cleanup", false, "remove what a crashed lanesd left (cgroups, moved processes) and exit")
	flag.StringVar(&opts.ConfigPath, "config", "", "config file (default "+daemon.DefaultConfigPath+" if it exists, else the embedded defaults)")
	flag.StringVar(&opts.Socket, "socket", "", "local API socket (default: the config's daemon.socket, /run/lanes/lanes.sock)")
	flag.StringVar(&opts.StateDir, "state-dir", "", "state directory (default: the config's daemon.state_dir, /var/lib/lanes)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: lanesd [flags]\n\nlanesd puts processes into lanes (interactive, normal, background, and the\nlanes of the config) and schedules their CPU and disk accordingly. It runs as\nroot until SIGINT/SIGTERM, then restores the host as it found it. SIGHUP\nreloads the config. Talk to it with `lanes`.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "lanesd: unexpected argument %q (see lanesd --help)\n", flag.Arg(0))
		os.Exit(2)
	}
	logger := log.New(os.Stderr, "lanesd: ", log.LstdFlags)
	opts.Logf = logger.Printf
	var err error
	if *cleanup {
		err = daemon.Cleanup(opts)
	} else {
		err = daemon.Run(context.Background(), opts)
	}
	if err != nil {
		logger.Printf("%v", err)
		os.Exit(1)
	}
}

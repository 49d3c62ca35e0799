//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "storm: Linux only (it measures lanesd placing processes into cgroups)")
	os.Exit(2)
}

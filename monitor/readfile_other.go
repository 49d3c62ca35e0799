//go:build !linux

package monitor

import "os"

// ReadSmall is os.ReadFile outside Linux.
func ReadSmall(path string) ([]byte, error) { return os.ReadFile(path) }

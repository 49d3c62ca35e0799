//go:build !linux

package ch5

// threadCPU is not measured off Linux.
func threadCPU() int64 { return 0 }

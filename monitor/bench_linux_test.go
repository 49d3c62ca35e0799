package monitor

import (
	"os"
	"testing"
)

func BenchmarkReadProcess(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		if _, err := ReadProcess(pid); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScan(b *testing.B) {
	for b.Loop() {
		if _, err := Scan(); err != nil {
			b.Fatal(err)
		}
	}
}

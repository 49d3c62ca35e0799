package lane

import "github.com/lanes-qos/lanes/internal/rate"

// ParseRate parses a configuration's rate string into bits per second
// with tc's units ("mbit" is bits, "mbps" bytes): see internal/rate and
// docs/CONFIG.md.
func ParseRate(s string) (uint64, error) { return rate.Parse(s) }

// FormatRate renders bits per second as ParseRate reads it ("20mbit").
func FormatRate(bps uint64) string { return rate.Format(bps) }

package lane

import (
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

var rateRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)$`)

// rateUnits are tc's rate units: bits per second, or bytes per second for
// the "bps" family. Prefixes are decimal (k = 1000).
var rateUnits = map[string]int64{
	"":     1,
	"bit":  1,
	"kbit": 1e3,
	"mbit": 1e6,
	"gbit": 1e9,
	"tbit": 1e12,
	"bps":  8,
	"kbps": 8e3,
	"mbps": 8e6,
	"gbps": 8e9,
	"tbps": 8e12,
}

// ParseRate parses a rate such as "20mbit", "500kbit", "1gbit", "2.5mbit"
// or "100000" (bits per second) into bits per second. Units are tc's,
// case-insensitive and decimal: bit, kbit, mbit, gbit, tbit, and bps,
// kbps, mbps, gbps, tbps in bytes per second. Zero, negative, fractional
// bit counts and junk are errors.
func ParseRate(s string) (uint64, error) {
	m := rateRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return 0, fmt.Errorf("invalid rate %q: want a number and a unit, e.g. \"20mbit\"", s)
	}
	unit, ok := rateUnits[m[2]]
	if !ok {
		return 0, fmt.Errorf("invalid rate %q: unknown unit %q (want bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps or tbps)", s, m[2])
	}
	r, ok := new(big.Rat).SetString(m[1])
	if !ok {
		return 0, fmt.Errorf("invalid rate %q", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(unit))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid rate %q: not a whole number of bits per second", s)
	}
	n := r.Num()
	if n.Sign() == 0 {
		return 0, fmt.Errorf("invalid rate %q: must be positive", s)
	}
	if !n.IsUint64() {
		return 0, fmt.Errorf("invalid rate %q: too large", s)
	}
	return n.Uint64(), nil
}

// FormatRate renders bits per second in the largest unit that keeps it a
// whole number, e.g. 20000000 -> "20mbit"; ParseRate reads it back.
func FormatRate(bps uint64) string {
	for _, u := range []struct {
		name string
		div  uint64
	}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if bps >= u.div && bps%u.div == 0 {
			return strconv.FormatUint(bps/u.div, 10) + u.name
		}
	}
	return strconv.FormatUint(bps, 10) + "bit"
}

package rate

import (
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

var rateRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)$`)

// units are tc's rate units in bits per second: the "bit" family counts
// bits, the "bps" family bytes.
var units = map[string]int64{
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

// Parse parses a rate such as "20mbit", "500kbit", "2.5mbit" or "100000"
// (bits per second) into bits per second. Units are case-insensitive:
// bit, kbit, mbit, gbit, tbit in bits per second; bps, kbps, mbps, gbps,
// tbps in bytes per second. Zero, negative numbers, fractions of a bit,
// exponents, unknown units and values above 2^64-1 are errors.
func Parse(s string) (uint64, error) {
	m := rateRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return 0, fmt.Errorf("invalid rate %q: want a number and a unit, e.g. \"20mbit\"", s)
	}
	unit, ok := units[m[2]]
	if !ok {
		return 0, fmt.Errorf("invalid rate %q: unknown unit %q (want bit, kbit, mbit, gbit or tbit for bits per second, or bps, kbps, mbps, gbps or tbps for bytes per second)", s, m[2])
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

// Format renders bits per second in the largest bit unit that keeps it a
// whole number, e.g. 20000000 -> "20mbit"; Parse reads it back.
func Format(bps uint64) string {
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

// ByteUnitNote explains a rate written in a bytes-per-second unit (bps,
// kbps, mbps, ...), which Parse reads as tc does, as bytes: "20Mbps" is
// 160 Mbit/s, eight times what most people writing it mean. It returns ""
// for bit units and for strings Parse does not accept.
func ByteUnitNote(s string) string {
	m := rateRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil || !strings.HasSuffix(m[2], "bps") {
		return ""
	}
	bps, err := Parse(s)
	if err != nil {
		return ""
	}
	bits := strings.TrimSuffix(m[2], "ps") + "it" // mbps -> mbit
	prefix := map[string]string{"bit": "", "kbit": "kilo", "mbit": "mega", "gbit": "giga", "tbit": "tera"}[bits]
	return fmt.Sprintf("%q is %s %sbytes per second (bps units count bytes, as in tc), that is %s; write %q for %sbits per second",
		s, m[1], prefix, Format(bps), m[1]+bits, prefix)
}

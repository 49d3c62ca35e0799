// Package rate is lanes' one parser and printer of bit rates, shared by
// the configuration (lane) and the testbed (bench scenarios, linkem). Units
// are tc's: "bit", "kbit", "mbit", "gbit", "tbit" are bits per second, and
// "bps", "kbps", "mbps", "gbps", "tbps" are BYTES per second ("1mbps" is
// 8 Mbit/s), as tc(8) and docs/CONFIG.md say. Prefixes are decimal. Pure
// Go, no kernel code.
package rate

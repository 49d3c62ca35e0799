// Package autorate is the controller behind `[net] rate = "auto"`: it
// moves the shaper's link rate, per direction, to follow a link whose
// capacity changes (cellular, Wi-Fi, a shared uplink), from the delay
// that probes to a reflector measure (not lanes' own flows' round trips:
// those include the queues of lanes' own tree, which the rate sets). It
// is the approach of cake-autorate applied to lanes' HTB trees: as long as the
// shaper is the bottleneck the link's own queue stays empty and the delay
// stays at its baseline; when the link becomes slower than the shaper,
// its queue grows, the delay rises above the baseline, and the shaper
// drops below what the link carried. Under load without such a rise the
// rate climbs back toward the configured maximum.
//
// Like idletime and control it is pure: no system calls, the clock
// injected, every decision returned as a Decision value. The daemon feeds
// it delay samples (RTT) and, at every tick, the bytes each direction
// carried; it applies the rates through netsched and publishes the
// decisions and estimates as monitor events.
//
// # Law
//
// The baseline is the delay of an empty queue: an exponentially weighted
// average that falls fast (weight BaselineDown) and rises slowly
// (BaselineUp), so that it tracks the minimum and follows a route change
// over tens of seconds. A sample is bloated when it exceeds the baseline
// by more than Threshold; the link is bloated when Detect of the last
// Window samples are. At each tick, for each direction with a range
// (Max > 0):
//
//   - bloated, the direction carrying at least MinLoad of its rate (a
//     TCP flow behind a slower bottleneck sends at the bottleneck's rate,
//     well below the shaper's), no decrease within Refractory, and the
//     delay not falling over the window since a decrease (a queue that
//     drains says the rate is already below the link's): the rate drops
//     below the link's rate, estimated as what the shaper sent over 1 +
//     the delay's slope (a queue fed at s and served at c grows its
//     delay by (s − c)/c each second), by the factor Down and by as much
//     again as drains the standing queue within Drain (at most to a
//     quarter), never below Min. A direction carrying less keeps its
//     rate: its traffic did not fill the queue (with RTTs alone the two
//     directions' delays are one).
//   - not bloated, loaded (carrying at least HighLoad of its rate), and a
//     sample since the last tick: the rate rises by the factor Up, never
//     above Max.
//   - not bloated and not loaded: nothing tells what the link can carry;
//     the rate keeps its value.
//
// With no delay sample for Stale (the reflector stopped answering), the
// controller holds every rate at its
// last value (the last good rate) and says so in the decision, until
// samples come back.
package autorate

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
// it delay samples and, at every tick, the bytes each direction carried;
// it applies the rates through netsched and publishes the decisions and
// estimates as monitor events. Each direction has its own delay signal:
// with one-way delays (SampleOneWay, from ICMP timestamp replies) a queue
// on the download path does not cut the upload; with round trips
// (Sample) both signals are the round trip. A one-way delay's rise counts
// only as far as the round trip's rise allows (a queue lengthens both):
// one the round trip does not share is the two clocks' offset moving,
// and that direction's baseline moves with it.
//
// # Law
//
// The baseline is the delay of an empty queue: an exponentially weighted
// average that falls fast (weight BaselineDown) and rises slowly
// (BaselineUp), so that it tracks the minimum and follows a route change
// over tens of seconds. A sample is bloated when it exceeds the baseline
// by more than Threshold; a direction is bloated when Detect of its last
// Window samples are, or when the last one exceeds the baseline by more
// than Severe (5 thresholds): behind a link that dropped to a quarter of
// the shaper's rate the queue's delay grows 3 ms each ms, and waiting
// for Detect samples lets it reach a second. At each tick, for each direction with a range
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
//     quarter), never below Min. Once a fresh sample, from a probe sent
//     after the decrease, is back within Threshold of the baseline, the
//     rate returns to the estimate × Down (the drain is over) rather
//     than climbing back from below it (a probe sent before crossed the
//     link before the queue, as those in flight at a delivery cut did). A
//     direction carrying less keeps its rate: its traffic did not fill
//     the queue (with round trips alone the two directions' delays are
//     one, and this is all that tells them apart).
//   - not bloated, loaded (carrying at least HighLoad of its rate), and a
//     sample since the last tick: the rate rises by the factor Up, never
//     above Max, but near the ceiling: the last rate whose probes showed
//     no queue before a decrease (or the decrease's own estimate of the
//     link's rate, where the link got slower than that since), corrected
//     while the decrease drains by the delay's slope then (a queue served
//     at the link's rate c and fed at the drained rate shrinks by
//     (c − rate)/c each second; from samples at least the threshold
//     over the baseline, where a jittery link's noise cannot make the
//     slope). A rise that would pass 97 % of the
//     ceiling stops there; from there the rate creeps, by 0.5 % a tick,
//     the step doubling a tick while the probes show no queue (within
//     30 % of the threshold), up to Up; where a queue begins it goes back
//     to 97 % of the ceiling, where the queue drains, and creeps afresh;
//     10 % past the ceiling with no queue, the ceiling is forgotten (the
//     link got faster) and the rate rises by twice Up's step until a
//     queue shows. A rise of Up a tick past the link's rate builds
//     a queue of tens of milliseconds before the probes report it, and
//     the law's decrease drains it only then; creeping finds the link
//     with a queue of a few (TestSteadyLink: 5 ms at p99 on the fluid link,
//     against 49 ms by Up alone; TestJitteryLink the same with probes
//     late by 3–9 ms at random).
//   - not bloated and not loaded: nothing tells what the link can carry;
//     the rate keeps its value.
//
// # Delivery
//
// A probe reports a queue only after crossing it: behind a link that fell
// to a quarter of the shaper's rate the queue's delay grows 3 ms each ms,
// so a probe that finds Severe's 50 ms of it returns some 90 ms after the
// fall, when about 250 ms stand behind it. The acknowledgements of the packets at the queue's head slow down
// at once. Flows takes what this host's TCP connections through the
// interface delivered over each short period (netsched.DeliveryMeter, a
// BPF TCP iterator) and cuts the upload at once when their delivery rate
// fell well below its recent peak while they were loading the link,
// limited by their congestion windows, still holding the path's worth at
// the peak (a sender that shrank its own flight, as BBR's ProbeRTT does
// every 10 s, delivers less because it sends less), with a queue behind
// them by Little's law (bytes in flight over the delivery rate, less the
// probes' base round trip); the delivery rate is then the link's, and the rate
// returns to it once the connections deliver what the shaper sends (the
// queue is gone). See Flows for the constants.
//
// # Follow
//
// The law above finds a link that keeps its rate with a queue of a few
// milliseconds, but a cellular link's rate swings within a second: the
// ceiling the last cut found is stale before the creep gets back to it,
// and the rate spends most of the time below the link (S2 in
// docs/BENCHMARKS.md). With Config.Follow the upload follows what its
// TCP connections deliver instead, at every delivery read (Flows, every
// FlowPeriod): while a queue stands at the bottleneck the link was busy,
// so what they delivered over the last FollowWindow is the link's rate,
// and the rate is set to it times 1 − FollowGain × (queue − Target), at
// least a quarter of it (a queue beyond the target drains); with a
// shorter queue and the upload loaded the rate rises from the higher of
// itself and the highest delivery of the last FollowWindow, by
// FollowGain × (Target − queue) and at most Up a read, toward a queue
// of Target, where the link stays busy. The target is at least
// FollowPackets full packets (Config.Packet) at the rate: a slow link
// serves its queue a packet at a time. The queue is the probes' rise
// over their baseline, plus a probe's lateness where one is late (sent
// Interval after the last answered and not back within the longest
// round trip of the recent answers, so that a jittery reply path is not
// taken for a queue): a link that stalls answers nothing. The probes'
// law keeps the download, and the upload while the meter is not read
// (Tick).
//
// With no delay sample for Stale (the reflector stopped answering), the
// controller holds every rate at its
// last value (the last good rate) and says so in the decision, until
// samples come back.
package autorate

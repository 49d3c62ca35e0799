// Package boost is priority boosting of communicating processes when
// connectivity appears (seed 000, Liang and Keshav): during a contact — a
// period in which a network is up after being down — the processes of a
// lane whose sockets carry traffic get a higher CPU priority (a lower
// nice value), so that a short contact is not wasted behind CPU hogs.
//
// A Policy is the seed's whole linear space: static (one boost for the
// contact), INCR (the boost grows) or DECR (it starts high and decays),
// stepping by one nice level every N events, every T, or every B bytes,
// from an initial to a final boost, clamped at a most-boosted nice value
// (the seed's −20), and reset or retained when the contact ends: with
// three slope types for each of the two dynamic kinds, plus static, and
// two endings, the seed's fourteen policies.
//
// Who counts as communicating is the seed's rule by default: a process
// whose sockets carry traffic in the contact. A policy may also count a
// process that starts in the lane during a contact, or while the link is
// down before it, from its start (Policy.From = Start), beyond the seed:
// a program launched when the network appears, or launched offline to
// wait for it, spends its start-up — loading, a TLS library's set-up,
// connecting — before its first packet, and beside CPU hogs that part
// can take longer than the transfer.
//
// A Tracker applies a policy to the processes it is told about: the
// daemon reports contacts beginning and ending (the link monitor's
// connectivity events, or the testbed's on/off schedule) and, during a
// contact, each process's socket counters (events and bytes, cumulative);
// the Tracker returns the nice value each process should have now. Like
// idletime and autorate it is pure: no system calls, the clock passed in.
// The daemon applies the changes with setpriority and undoes every one —
// when a contact ends under reset, when a process leaves the lane, when
// the lane's policy changes and when lanesd stops.
//
// A nice value orders a process against the others of its own CPU group
// (a lane's cgroup): boosting is how a communicating process gets ahead
// of the CPU hogs of its own lane, as it did of every process in the
// seed's single run queue; across lanes their weights decide.
package boost

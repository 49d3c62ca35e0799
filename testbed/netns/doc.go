// Package netns builds the testbed's network topologies: network namespaces
// joined by veth pairs (src — rtr — dst, or several paths through several
// routers), with a pair of TUN devices in each router that carry all
// src↔dst traffic through a user-space link emulator, and a sweeper for the
// leftovers of a crashed run. Only the testbed and the benchmark runner
// import it; lanes itself must not.
package netns

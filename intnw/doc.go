// Package intnw is Intentional Networking (seed 002, chapter 2): one
// logical connection, the multi-socket, over every usable network at once,
// whose traffic the application labels by what it is for.
//
// The unit of data is the IROB (isolated reliable ordered bytestream): a
// message whose bytes the peer receives whole and in order, never mixed
// with another's, though IROBs may overtake each other. An IROB carries a
// Label (foreground or background, small or large) and may depend on
// earlier IROBs, which the peer then receives first. The multi-socket keeps
// one TCP connection per path (a local address and the peer's address
// reached through it) and chooses, chunk by chunk, which path carries what:
// foreground small on the path that would deliver it soonest (half its
// least round trip, and what its socket holds beyond its pipe at its
// bandwidth), foreground large on the one of most bandwidth, background
// striped over the paths not carrying foreground. Background a path's
// socket holds is bounded by what the path fills its pipe with (bandwidth
// times least RTT) and sends in 50 ms; on the widest path, when the next
// small foreground message goes elsewhere, that window is the seed's
// anticipatory one: 50 ms after foreground traffic on the path, doubling
// each second without any up to a second. A chunk longer than the room
// left is cut to fit. The calmest path (the least round trip, where the
// next small foreground message goes) takes background only when no other
// path has room, so that message finds its socket clear, and a narrow
// path's backlog is short when foreground falls back to it. Paths are
// measured from the kernel's TCP_INFO of their sockets, and a path whose
// bound holds background back probes upward of its estimate now and then
// (its pipe counted larger for a few round trips, the payload then
// acknowledged raising the estimate), since a sender held to its
// estimate never shows the path to be faster; an estimate fallen far
// below the highest measured lately is probed at twice its pipe, outside
// stalls. Paths are pinged: a path
// whose pongs are late is stalled and carries nothing new. When a path goes (its
// address removed, its socket failing) or stalls, what it had sent and the
// peer had not acknowledged goes again on another path: no byte is lost and
// the peer delivers no IROB twice. A label with no appropriate path defers
// its IROB; a thunk given with it is called when one appears.
//
// The server end is the same library: Listen accepts multi-sockets and the
// paths that join them.
package intnw

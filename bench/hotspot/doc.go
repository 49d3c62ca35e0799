// Package hotspot is seed 000's experiment in lanes' testbed: a bulk
// encrypted transfer from a CPU-starved sender over a link that comes and
// goes (a mobile entering and leaving hotspots), with 0 to 30 CPU hogs
// beside the sender, run with no boosting and with each boosting policy
// family, and reported beside the seed's published transfer times.
//
// Each run starts the testbed's line topology with the link emulator at
// 10 Mbit/s whose up and down periods are exponential (mean 5 s each, the
// seed's mobility model), lanesd in the sender's namespace with a lane
// "sync" capped to a sliver of one CPU (the seed clocked its host down to
// 325 MHz) and the arm's boost policy, the hogs (stress-ng --cpu N) in that
// lane, and then the transfer: socat's TLS client (OpenSSL) sending a 41
// MB file to socat's TLS server in the other namespace, all pinned to one
// CPU.
// The emulator's schedule is the contact oracle: at each of its
// transitions the runner tells lanesd (POST /v1/contact), as the seed's
// mobility model told its kernel. The transfer time is from the client's
// start to the server's end of the connection.
package hotspot

// Package intproxy carries unmodified applications' TCP connections over
// an Intentional Networking multi-socket (package intnw, seed 002 §2): the
// client end accepts local connections, by SOCKS5 or redirected to it
// transparently by a netfilter rule, labels each from the lane of the
// process that opened it (an interactive lane's traffic is foreground
// small, a background lane's background large), and sends it as a stream
// of IROBs to the server end, which connects to the destination when its
// allow-list permits and carries the replies back the same way.
//
// Each local connection is a stream. A stream's IROBs depend on the
// stream's previous IROB in the same direction, so its bytes arrive in
// order, while streams do not wait for each other: a foreground stream's
// bytes overtake a background stream's on the multi-socket.
package intproxy

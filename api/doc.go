// Package api defines lanes' local API: the wire types exchanged between
// lanesd and its clients over a Unix socket, the versioned routes, and the
// stable error codes. It has no kernel code and no HTTP server; the daemon
// serves these routes and package api/client calls them.
package api

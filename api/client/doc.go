// Package client is the Go client of lanes' local API: the lanes CLI, tests
// and other programs use it to talk to lanesd over its Unix socket.
package client

// Package benchcmd is the `lanes bench` subcommand: it runs a network
// benchmark scenario (package bench) and prints progress. It lives apart
// from package cli so that the CLI proper stays a client of the daemon;
// cmd/lanes wires it in.
package benchcmd

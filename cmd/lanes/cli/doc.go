// Package cli is the `lanes` command: every subcommand is a client of
// lanesd's local API, except `lanes run` without a daemon (which applies the
// lane itself for the command's lifetime), `lanes doctor` without a daemon
// (which probes locally) and `lanes config check` (which only parses).
package cli

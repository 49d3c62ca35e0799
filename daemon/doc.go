// Package daemon is lanesd: it loads the configuration, creates the lanes'
// cgroups, puts processes into lanes by rule as they exec and by request
// through the local API, and on stop restores the host as it found it.
//
// It depends on nearly every part of lanes; nothing but cmd/lanesd and
// end-to-end tests should import it.
package daemon

// Package peercred reads the credentials of the process at the other end of
// a Unix socket (SO_PEERCRED), so the local API can decide what a caller
// may do from who the kernel says it is, not from what it claims.
package peercred

// Package netnsrun runs a function in another network namespace, given by
// its path (/run/netns/NAME) or an open handle, on a locked thread of its
// own: the sockets the function opens stay in that namespace. intnw's
// paths and listeners, intproxy's server end and netsched's idletime gate
// sockets use it.
package netnsrun

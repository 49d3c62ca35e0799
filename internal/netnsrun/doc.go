// Package netnsrun runs a function in another network namespace, given by
// its path (/run/netns/NAME), on a locked thread of its own: the sockets
// the function opens stay in that namespace. intnw's paths and listeners
// and intproxy's server end use it.
package netnsrun

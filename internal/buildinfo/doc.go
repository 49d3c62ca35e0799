// Package buildinfo says which build of lanes is running: the API version
// with the commit and Go release the binary was built from, for
// --version and the metrics' build_info.
package buildinfo

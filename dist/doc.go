// Package dist holds what installs lanes on a distribution: the systemd
// unit (lanes.service) and the Debian package's files; its tests check
// them with the distribution's own tools.
package dist

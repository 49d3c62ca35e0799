//go:build !linux

package netnsrun

import "errors"

// Run runs fn; another namespace than the caller's needs Linux.
func Run(path string, fn func() error) error {
	if path != "" {
		return errors.New("network namespaces need Linux")
	}
	return fn()
}

//go:build !linux

package e2e

import "errors"

// becomeRoot is Linux only (the e2e tests run on Linux).
func becomeRoot() error { return errors.ErrUnsupported }

package netsched

import (
	"fmt"
	"os/exec"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

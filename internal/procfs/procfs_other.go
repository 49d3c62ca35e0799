//go:build !linux

package procfs

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

var errNoPID = syscall.ESRCH

// ReadSmall is os.ReadFile outside Linux.
func ReadSmall(path string) ([]byte, error) { return os.ReadFile(path) }

func readInto(path []byte, buf []byte) ([]byte, error) {
	return os.ReadFile(string(path[:len(path)-1]))
}

func readlinkInto(path []byte, buf []byte) (int, error) {
	s, err := os.Readlink(string(path[:len(path)-1]))
	if err != nil {
		return 0, err
	}
	return copy(buf, s), nil
}

func listNumeric(path string) ([]int, error) {
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if v, err := strconv.Atoi(e.Name()); err == nil && v > 0 {
			out = append(out, v)
		}
	}
	return out, nil
}

// Started is not supported outside Linux.
func Started(pid int) (time.Time, error) { return time.Time{}, errors.ErrUnsupported }

package ch5

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
)

// decodeLines decodes the JSON lines of b (one value per line, as the
// video's ends print each second) and appends them to out.
func decodeLines[T any](b *bytes.Buffer, out *[]T) error {
	sc := bufio.NewScanner(b)
	for sc.Scan() {
		var x T
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return fmt.Errorf("%q: %w", sc.Text(), err)
		}
		*out = append(*out, x)
	}
	return sc.Err()
}

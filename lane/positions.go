package lane

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// keyPositions maps a dotted key path ("lanes.video.cpu.cap", with
// array-table elements as "rule[1]", counted from 1) to the byte offset
// where the key first appears in the document.
type keyPositions struct {
	data       []byte
	offsets    map[string]int
	lineStarts []int // byte offset of the start of each line
	// tables holds the paths defined as plain tables ([x] headers and
	// inline tables), to tell [rule] from [[rule]].
	tables map[string]bool
}

// line returns the 1-based line of key, or 0 when the key is not in the
// document (a default value). An array element ("x.ports[2]") that was not
// indexed has its array's line.
func (k keyPositions) line(key string) int {
	off, ok := k.offsets[key]
	for !ok && strings.HasSuffix(key, "]") {
		i := strings.LastIndexByte(key, '[')
		if i < 0 {
			break
		}
		key = key[:i]
		off, ok = k.offsets[key]
	}
	if !ok {
		return 0
	}
	// The number of lines starting at or before off.
	return sort.Search(len(k.lineStarts), func(i int) bool { return k.lineStarts[i] > off })
}

// offset returns the byte offset of key, or -1.
func (k keyPositions) offset(key string) int {
	if off, ok := k.offsets[key]; ok {
		return off
	}
	return -1
}

// indexKeys walks the document with go-toml's parser and records where each
// key is. It stops quietly at a syntax error: the decoder reports that one.
func indexKeys(data []byte) keyPositions {
	kp := keyPositions{data: data, offsets: map[string]int{}, lineStarts: []int{0}, tables: map[string]bool{}}
	for i, b := range data {
		if b == '\n' {
			kp.lineStarts = append(kp.lineStarts, i+1)
		}
	}
	var p unstable.Parser
	p.Reset(data)
	arrays := map[string]int{} // array-table path -> elements seen
	table := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			path, off := keyPath(e.Key())
			path = inArrays(path, arrays)
			table = path
			kp.tables[path] = true
			kp.record(path, off)
		case unstable.ArrayTable:
			path, off := keyPath(e.Key())
			// A nested array table ([[controller.actuator]]) belongs to
			// the latest element of its parent: controller[2].actuator.
			if i := strings.LastIndexByte(path, '.'); i > 0 {
				path = inArrays(path[:i], arrays) + path[i:]
			}
			arrays[path]++
			table = fmt.Sprintf("%s[%d]", path, arrays[path])
			kp.record(table, off)
		case unstable.KeyValue:
			path, off := keyPath(e.Key())
			kp.keyValue(join(table, path), off, e.Value())
		}
	}
	return kp
}

// inArrays puts the index of the latest element into each part of path
// that is an array of tables: "controller.metric" after the second
// [[controller]] is "controller[2].metric".
func inArrays(path string, arrays map[string]int) string {
	parts := strings.Split(path, ".")
	out := ""
	for _, p := range parts {
		out = join(out, p)
		if n := arrays[out]; n > 0 {
			out = fmt.Sprintf("%s[%d]", out, n)
		}
	}
	return out
}

func (kp keyPositions) record(path string, off int) {
	if _, ok := kp.offsets[path]; !ok && off >= 0 {
		kp.offsets[path] = off
	}
	// Dotted keys also define their parents.
	for i := len(path) - 1; i > 0; i-- {
		if path[i] == '.' {
			if _, ok := kp.offsets[path[:i]]; !ok && off >= 0 {
				kp.offsets[path[:i]] = off
			}
		}
	}
}

func (kp keyPositions) keyValue(path string, off int, value *unstable.Node) {
	kp.record(path, off)
	if value == nil {
		return
	}
	switch value.Kind {
	case unstable.InlineTable:
		kp.tables[path] = true
		it := value.Children()
		for it.Next() {
			kv := it.Node()
			if kv.Kind != unstable.KeyValue {
				continue
			}
			sub, suboff := keyPath(kv.Key())
			kp.keyValue(join(path, sub), suboff, kv.Value())
		}
	case unstable.Array:
		it := value.Children()
		for i := 1; it.Next(); i++ {
			n := it.Node()
			elem := fmt.Sprintf("%s[%d]", path, i)
			switch n.Kind {
			case unstable.InlineTable:
				kp.record(elem, int(n.Raw.Offset))
				kp.keyValue(elem, int(n.Raw.Offset), n)
			case unstable.String, unstable.Integer, unstable.Float, unstable.Bool:
				// Scalars too, so that a bad entry of a list (net.ports)
				// is reported on its own line.
				kp.record(elem, int(n.Raw.Offset))
			}
		}
	}
}

// keyPath joins a key's parts with dots and returns the offset of its
// first part (-1 if unknown).
func keyPath(it unstable.Iterator) (string, int) {
	var parts []string
	off := -1
	for it.Next() {
		n := it.Node()
		if off < 0 {
			off = int(n.Raw.Offset)
		}
		parts = append(parts, string(n.Data))
	}
	return strings.Join(parts, "."), off
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// lineColOffset returns the byte offset of 1-based line:col.
func (k keyPositions) lineColOffset(line, col int) int {
	if line < 1 || line > len(k.lineStarts) {
		return -1
	}
	return k.lineStarts[line-1] + col - 1
}

// exactKey returns the most specific key that starts at line:col, or "".
func (k keyPositions) exactKey(line, col int) string {
	off := k.lineColOffset(line, col)
	best := ""
	for path, o := range k.offsets {
		if o == off && len(path) > len(best) {
			best = path
		}
	}
	return best
}

// keyAt names the key a decode error at line:col is about. go-toml knows
// the key only down to the table being decoded ("lanes.video.cpu" for an
// inline table, "rule.comm" without the array index), so the most precise
// indexed key on that line, at or before the column, whose path extends
// hint (ignoring array indices) wins; hint itself when none does.
func (k keyPositions) keyAt(line, col int, hint []string) string {
	want := strings.Join(hint, ".")
	if line <= 0 {
		return want
	}
	off := k.lineColOffset(line, col)
	if off < 0 {
		return want
	}
	lineStart := k.lineStarts[line-1]
	best, bestOff := want, -1
	for path, o := range k.offsets {
		if o < lineStart || o > off || o < bestOff {
			continue
		}
		bare := stripIndices(path)
		if want != "" && bare != want && !strings.HasPrefix(bare, want+".") {
			continue
		}
		if o > bestOff || len(path) > len(best) {
			best, bestOff = path, o
		}
	}
	return best
}

func stripIndices(path string) string {
	var b strings.Builder
	depth := 0
	for _, r := range path {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

package lane

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestConfigDocCoversEveryKey checks that docs/CONFIG.md mentions every
// key of the file schema, so that a new key cannot go undocumented.
func TestConfigDocCoversEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if f.Anonymous {
				walk(prefix, f.Type)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",") // the key, without options (omitempty)
			keys = append(keys, prefix+name)
			walk(prefix+name+".", f.Type)
		}
	}
	walk("", reflect.TypeOf(fileConfig{}))
	if len(keys) < 20 {
		t.Fatalf("found only %d keys: %v", len(keys), keys)
	}
	for _, k := range keys {
		last := k[strings.LastIndex(k, ".")+1:]
		if !strings.Contains(string(doc), "`"+last+"`") && !strings.Contains(string(doc), "["+last+"]") && !strings.Contains(string(doc), "["+last+".") && !strings.Contains(string(doc), "[["+last+"]]") {
			t.Errorf("docs/CONFIG.md does not mention key %s (as `%s`)", k, last)
		}
	}
}

package sinks

import "testing"

// Every key of the YAML has its meaning, and every meaning its key: the
// reference cannot fall behind the types.
func TestEveryKeyHasItsMeaning(t *testing.T) {
	known := map[string]bool{}
	n := 0
	for _, g := range Keys() {
		for _, k := range g.Keys {
			known[g.Prefix+k.Name] = true
			n++
			if k.Doc == "" {
				t.Errorf("key %s%s has no meaning in KeyDocs", g.Prefix, k.Name)
			}
		}
	}
	for key := range KeyDocs {
		if !known[key] {
			t.Errorf("KeyDocs[%q]: no such key", key)
		}
	}
	if n < 30 {
		t.Errorf("Keys found %d keys: the yaml tags are not read", n)
	}
}

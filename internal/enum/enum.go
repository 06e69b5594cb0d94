// Package enum holds what kafka2pg's closed sets of settings share: the
// names of their values, as a flag, a config file and a message write
// them. Each set is a type of its own in the package it configures
// (reader.IsolationLevel, ingest.OnError), an int whose zero value is the
// default, with String, a Parse function and the text marshalling that
// flags and config files use; Names is what those methods have in common.
package enum

import (
	"fmt"
	"strings"
)

// Names are the names of a set's values, in the order of the values: the
// value 0 is named Names[0].
type Names []string

// Valid reports whether v is a value of the set.
func (n Names) Valid(v int) bool { return v >= 0 && v < len(n) }

// Name is the name of v; typ names the set for a value out of it:
// IsolationLevel(7).
func (n Names) Name(v int, typ string) string {
	if n.Valid(v) {
		return n[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// Parse returns the value named s.
func (n Names) Parse(s string) (int, error) {
	for i, name := range n {
		if s == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%q is not %s", s, n.List())
}

// List is the names as a sentence: "a, b or c".
func (n Names) List() string {
	if len(n) < 2 {
		return strings.Join(n, "")
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

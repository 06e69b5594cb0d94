package sinks

import (
	"maps"
	"reflect"
	"slices"

	"github.com/kafka2pg/kafka2pg/ingest"
)

// Diff is what a new Set changes of an old one, topic by topic: what a
// running bridge must hand over when its configuration is reloaded.
type Diff struct {
	// Added and Removed are the topics that have a sink in Fixed in the
	// new set only, in the old one only; Changed those whose sink in both
	// is built from another configuration. Sorted.
	Added, Changed, Removed []string
	// PatternsChanged: the topic_regex sinks differ (in number, order or
	// configuration), so every sink they built is built again.
	PatternsChanged bool
}

// Empty reports whether the sets are built from the same configuration.
func (d Diff) Empty() bool {
	return len(d.Added)+len(d.Changed)+len(d.Removed) == 0 && !d.PatternsChanged
}

// DiffFrom compares s with old, the set it replaces. A sink is unchanged
// when both sets built it from the same keys of the same sink in the
// config (its line in the file aside) and the same default schema; a sink
// of a Set made by hand, which carries no configuration, always counts as
// changed.
func (s Set) DiffFrom(old Set) Diff {
	var d Diff
	for topic := range s.Fixed {
		if _, ok := old.Fixed[topic]; !ok {
			d.Added = append(d.Added, topic)
		} else if !sameSpec(s.schema, s.specs, old.schema, old.specs, topic) {
			d.Changed = append(d.Changed, topic)
		}
	}
	for topic := range old.Fixed {
		if _, ok := s.Fixed[topic]; !ok {
			d.Removed = append(d.Removed, topic)
		}
	}
	slices.Sort(d.Added)
	slices.Sort(d.Changed)
	slices.Sort(d.Removed)
	d.PatternsChanged = len(s.Patterns) != len(old.Patterns) || s.schema != old.schema && len(s.Patterns) > 0
	for i := 0; !d.PatternsChanged && i < len(s.Patterns); i++ {
		a, b := s.Patterns[i], old.Patterns[i]
		d.PatternsChanged = a.re == nil || b.re == nil || !reflect.DeepEqual(withoutPosition(a.spec), withoutPosition(b.spec))
	}
	return d
}

// Keep is s with the sinks of unchanged topics taken from old: their
// mappers, which hold what they learnt while running (a registry's
// schemas, a table that changed), go on; the writer sees the same sink and
// keeps its own state of the topic too (ingest.Writer.SetSinks).
func (s Set) Keep(old Set, d Diff) Set {
	out := s
	out.Fixed = maps.Clone(s.Fixed)
	for topic := range out.Fixed {
		if o, ok := old.Fixed[topic]; ok && !slices.Contains(d.Changed, topic) {
			out.Fixed[topic] = o
		}
	}
	if !d.PatternsChanged {
		out.Patterns = old.Patterns
	}
	return out
}

// FixedOf are the sinks of topics in s.Fixed.
func (s Set) FixedOf(topics []string) map[string]ingest.Sink {
	out := make(map[string]ingest.Sink, len(topics))
	for _, t := range topics {
		if sink, ok := s.Fixed[t]; ok {
			out[t] = sink
		}
	}
	return out
}

func sameSpec(schemaA string, a map[string]Sink, schemaB string, b map[string]Sink, topic string) bool {
	x, okA := a[topic]
	y, okB := b[topic]
	return okA && okB && schemaA == schemaB && reflect.DeepEqual(withoutPosition(x), withoutPosition(y))
}

// withoutPosition is s without what says where it was written.
func withoutPosition(s Sink) Sink {
	s.Line, s.whereLine, s.childrenLine = 0, 0, 0
	if len(s.Children) > 0 {
		s.Children = slices.Clone(s.Children)
		for i := range s.Children {
			s.Children[i].Line = 0
		}
	}
	return s
}

package sinks_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/kafka2pg/kafka2pg/sinks"
)

func TestDiffFrom(t *testing.T) {
	t.Parallel()
	const old = `sinks:
  - {topic: a, columns: [{name: n, path: n, type: bigint}]}
  - {topic: b}
  - {topic: c}
`
	for _, tc := range []struct {
		name, next              string
		added, changed, removed []string
		patternsChanged         bool
	}{
		{name: "the same sinks on other lines change nothing", next: `sinks:

  - {topic: c}
  - {topic: b}
  - topic: a
    columns: [{name: n, path: n, type: bigint}]
`},
		{name: "a column added changes its sink only", changed: []string{"a"}, next: `sinks:
  - {topic: a, columns: [{name: n, path: n, type: bigint}, {name: x, path: x, type: text}]}
  - {topic: b}
  - {topic: c}
`},
		{name: "a sink added and one removed", added: []string{"d"}, removed: []string{"c"}, next: `sinks:
  - {topic: a, columns: [{name: n, path: n, type: bigint}]}
  - {topic: b}
  - {topic: d}
`},
		{name: "another default schema changes every sink", changed: []string{"a", "b", "c"}, next: `schema: other
` + old},
		{name: "a topic_regex added changes the patterns", patternsChanged: true, next: old + `  - {topic_regex: 'e\..*'}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before, after := build(t, old), build(t, tc.next)
			d := after.DiffFrom(before)
			if !slices.Equal(d.Added, tc.added) || !slices.Equal(d.Changed, tc.changed) || !slices.Equal(d.Removed, tc.removed) || d.PatternsChanged != tc.patternsChanged {
				t.Errorf("DiffFrom = %+v, want added %v, changed %v, removed %v, patterns changed %v", d, tc.added, tc.changed, tc.removed, tc.patternsChanged)
			}
			if d.Empty() != (len(tc.added)+len(tc.changed)+len(tc.removed) == 0 && !tc.patternsChanged) {
				t.Errorf("Empty() = %v for %+v", d.Empty(), d)
			}
			kept := after.Keep(before, d)
			for topic, sink := range kept.Fixed {
				old, had := before.Fixed[topic]
				same := had && old.Mapper == sink.Mapper && reflect.DeepEqual(old.Table, sink.Table)
				if want := had && !slices.Contains(d.Changed, topic); same != want {
					t.Errorf("Keep: topic %s keeps its running sink: %v, want %v", topic, same, want)
				}
			}
			if len(kept.Fixed) != len(after.Fixed) {
				t.Errorf("Keep has %d sinks, want %d", len(kept.Fixed), len(after.Fixed))
			}
		})
	}
}

// A Set made by hand carries no configuration: each of its sinks counts
// as changed, so a reload never keeps a sink it cannot compare.
func TestDiffFromASetMadeByHandChangesEverySink(t *testing.T) {
	t.Parallel()
	built := build(t, "sinks:\n  - {topic: a}\n")
	byHand := sinks.Set{Fixed: built.Fixed}
	if d := byHand.DiffFrom(built); !slices.Equal(d.Changed, []string{"a"}) {
		t.Errorf("DiffFrom = %+v, want a changed", d)
	}
}

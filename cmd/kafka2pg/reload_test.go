package main

import (
	"slices"
	"testing"
)

// A reload names each key of the file, sinks aside, that changed, was
// added or went: they need a restart. A key on another line with the same
// values is not a change.
func TestRestartSettingsNameTheChangedKeys(t *testing.T) {
	t.Parallel()
	running := map[string]flagValue{
		"kafka-brokers":  {line: 1, values: []string{"a:9092", "b:9092"}},
		"pg-max-conns":   {line: 2, values: []string{"4"}},
		"batch-max-rows": {line: 3, values: []string{"1000"}},
		"kafka-group":    {line: 4, values: []string{"g"}},
	}
	next := map[string]flagValue{
		"kafka-brokers": {line: 9, values: []string{"a:9092", "b:9092"}},
		"pg-max-conns":  {line: 2, values: []string{"6"}},
		"kafka-group":   {line: 4, values: []string{"g"}},
		"log-level":     {line: 5, values: []string{"debug"}},
	}
	got := restartSettings(running, next)
	if want := []string{"batch-max-rows", "log-level", "pg-max-conns"}; !slices.Equal(got, want) {
		t.Errorf("restartSettings = %q, want %q", got, want)
	}
	if got := restartSettings(running, running); len(got) != 0 {
		t.Errorf("restartSettings of the same keys = %q, want none", got)
	}
}

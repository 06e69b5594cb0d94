package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

// appendAndRead writes rs as the tests do (testreport.Append) and reads
// them back as the command does.
func appendAndRead[T testreport.FaultResult | testreport.ScaleEntry](t *testing.T, rs []T, what string, check func(T) error) []T {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.jsonl")
	for _, r := range rs {
		if err := testreport.Append(path, r); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := decodeLines(f, what, check)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

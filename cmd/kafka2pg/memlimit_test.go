package main

import (
	"strings"
	"testing"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"256MiB": 256 << 20, "1GiB": 1 << 30, "300MB": 300e6, "1048576": 1 << 20, " 64 MiB ": 64 << 20, "7KiB": 7 << 10} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1MiB", "1.5GiB", "ten", "99999999999GiB"} {
		if got, err := parseByteSize(bad); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", bad, got)
		}
	}
}

func TestAMemoryLimitBelow32MiBNamesTheFlag(t *testing.T) {
	o := &runOptions{pgURL: "postgres://x", start: "earliest", memoryLimit: "16MiB"}
	err := o.validate()
	if err == nil || !strings.Contains(err.Error(), "--memory-limit") {
		t.Fatalf("validate() = %v, want an error naming --memory-limit", err)
	}
}

package main

import (
	"runtime/debug"
	"testing"
)

func TestResolveVersion(t *testing.T) {
	built := func(v string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Main: debug.Module{Version: v}}, true }
	}
	for _, tc := range []struct {
		name    string
		stamped string
		info    func() (*debug.BuildInfo, bool)
		want    string
	}{
		{"a stamped version wins over the module's", "v1.2.3-4-gabcdef0", built("v1.2.0"), "v1.2.3-4-gabcdef0"},
		{"go install module@version reports that version", "dev", built("v1.2.0"), "v1.2.0"},
		{"a build of the working tree without VCS data stays dev", "dev", built("(devel)"), "dev"},
		{"no build information stays dev", "dev", func() (*debug.BuildInfo, bool) { return nil, false }, "dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolveVersion(tc.stamped, tc.info); got != tc.want {
				t.Fatalf("resolveVersion(%q) = %q, want %q", tc.stamped, got, tc.want)
			}
		})
	}
}

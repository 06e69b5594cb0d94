package main

import "runtime/debug"

// resolveVersion is the version kafka2pg reports: the one stamped at link
// time (make build, make image and the Dockerfile pass -X main.version from
// git describe), else the module version that `go install
// github.com/kafka2pg/kafka2pg/cmd/kafka2pg@v1.2.3` records in the binary
// (or the pseudo-version of a go build in a git checkout), else "dev".
func resolveVersion(stamped string, info func() (*debug.BuildInfo, bool)) string {
	if stamped != "dev" {
		return stamped
	}
	if bi, ok := info(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return stamped
}

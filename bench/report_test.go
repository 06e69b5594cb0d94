package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The bench's own outputs, changed by the run before, do not make the tree
// dirty; any other change does.
func TestDescribeCommitIgnoresTheBenchOutputs(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("bench/results.md", "old")
	write("bench/results.svg", "old")
	write("main.go", "package main")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	outs := []string{"bench/results.md", "bench/results.svg"}
	if got := describeCommit(outs...); strings.Contains(got, "uncommitted") || got == "unknown" {
		t.Fatalf("a clean tree: %q", got)
	}
	write("bench/results.md", "new")
	write("bench/results.svg", "new")
	if got := describeCommit(outs...); strings.Contains(got, "uncommitted") {
		t.Errorf("only the outputs changed: %q, want the bare commit", got)
	}
	write("main.go", "package main // changed")
	if got := describeCommit(outs...); !strings.HasSuffix(got, " + uncommitted changes") {
		t.Errorf("main.go changed: %q, want uncommitted changes", got)
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// A median that misses its goal by less than the printed digits shows the
// digits that tell it from the goal, so that no MISS reads "0.75" against
// "≥ 0.75" or "250 ms" against "≤ 250 ms"; one clear of it prints as usual.
func TestATargetMissedByAHairPrintsTheDigitsThatShowIt(t *testing.T) {
	run := func(kind string, rows int) result {
		return result{Kind: kind, Table: typedTable, Records: rows, ActiveRows: rows, Active: time.Second}
	}
	window := func(p99 float64) latencyResult {
		return latencyResult{result: result{Records: 1000, ActiveRows: 1000, Active: time.Second, P99: p99}, TargetRate: 1000}
	}
	cases := []struct {
		name                   string
		typedRows              int
		p99                    float64
		peak                   int64
		ratio, latency, memory string
		verdicts               [3]string
	}{
		{"a hair under", 7_496, 0.2504, 256_000_000 + 50_000, "0.7496×", "250.4 ms", "244.2 MiB = 256.1 MB", [3]string{"MISS", "MISS", "MISS"}},
		{"clear of them", 7_000, 0.2000, 243 << 20, "0.70×", "200 ms", "243 MiB = 255 MB", [3]string{"MISS", "PASS", "PASS"}},
		{"a hair over", 7_504, 0.2496, 256_000_000 - 50_000, "0.7504×", "249.6 ms", "244.09 MiB = 255.9 MB", [3]string{"PASS", "PASS", "PASS"}},
	}
	for _, c := range cases {
		rep := &report{
			blocks:  []block{{rep: 1, table: typedTable, ceiling: []result{run("ceiling2", 10_000)}, contenders: []result{run("bridge", c.typedRows)}}},
			latency: []latencyResult{window(c.p99)},
			backlog: &result{Records: 5_000_000, PeakRSS: c.peak},
		}
		got := map[string]target{}
		for _, tg := range rep.targets() {
			got[tg.goal] = tg
		}
		for i, w := range []struct{ goal, measured string }{
			{"kafka2pg typed ÷ ceiling ≥ 0.75×", c.ratio},
			{"p99 record-to-commit latency at half the maximum rate, default flush settings ≤ 250 ms", c.latency + " over 1 windows"},
			{"peak RSS draining a 5,000,000-record backlog ≤ 256 MB (244.1 MiB)", c.memory + " ("},
		} {
			tg, ok := got[w.goal]
			if !ok {
				t.Fatalf("%s: no target %q", c.name, w.goal)
			}
			if !strings.HasPrefix(tg.measured, w.measured) || tg.verdict != c.verdicts[i] {
				t.Errorf("%s: %q measured %q, %s; want it to start %q, %s", c.name, w.goal, tg.measured, tg.verdict, w.measured, c.verdicts[i])
			}
		}
	}
}

package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// embedProgram is a program of another module that loads a YAML sink
// config and runs the bridge with it, through the exported API only: what
// an embedder writes. main is under 30 lines.
const embedProgram = `package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/sinks"
)

func main() {
	var cfg sinks.Config
	data, err := os.ReadFile(os.Args[1])
	if err == nil {
		err = yaml.Unmarshal(data, &cfg)
	}
	ctx := context.Background()
	set, err2 := cfg.Build(ctx, nil)
	topics, regex := cfg.Topics()
	b, err3 := bridge.New(bridge.Config{Sinks: set, PostgresURL: os.Getenv("DATABASE_URL"), UntilCaughtUp: true,
		Kafka: reader.Config{Brokers: strings.Split(os.Getenv("KAFKA_BROKERS"), ","), Group: os.Args[2], Topics: topics, TopicsAreRegex: regex},
	}, nil, nil)
	for _, e := range []error{err, err2, err3} {
		if e != nil {
			fmt.Fprintln(os.Stderr, e)
			os.Exit(1)
		}
	}
	if err := b.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(b.Stats().Rows, "rows written")
}
`

// A program outside this module (a go.mod of its own that requires
// kafka2pg, replaced by this checkout) builds against the exported API
// and runs the bridge from a YAML sink config: the records land, counted
// by SQL. The build uses the module cache the suite itself was built from
// (and the Go proxy of the environment for anything it lacks).
func TestAProgramOutsideTheModuleRunsTheBridgeFromAYAMLConfig(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(embedProgram[strings.Index(embedProgram, "func main()"):], "\n"); n >= 30 {
		t.Fatalf("the embedding program's main is %d lines; the point is that it takes fewer than 30", n)
	}
	s := newScenario(t, 2)
	dir := t.TempDir()
	gomod := fmt.Sprintf("module example.com/embed\n\ngo 1.26\n\nrequire github.com/kafka2pg/kafka2pg v0.0.0\n\nreplace github.com/kafka2pg/kafka2pg => %s\n", root)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	table := s.table + "_embedded"
	yml := fmt.Sprintf("sinks:\n  - topic: %s\n    table: %s\n", s.topic, table)
	for name, content := range map[string]string{"go.mod": gomod, "go.sum": string(sum), "main.go": embedProgram, "sinks.yaml": yml} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.CommandContext(t.Context(), "go", "build", "-o", "embed", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOSUMDB=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of a program outside the module: %v\n%s", err, out)
	}
	s.produce(t, 500)
	run := exec.CommandContext(t.Context(), filepath.Join(dir, "embed"), filepath.Join(dir, "sinks.yaml"), s.group)
	run.Env = append(os.Environ(), "DATABASE_URL="+s.pgURL, "KAFKA_BROKERS="+s.kafka.Brokers())
	started := time.Now()
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("the embedding program: %v\n%s", err, out)
	}
	var rows int
	if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(DISTINCT (kafka_partition, kafka_offset)) FROM %s`, tableName(table))).Scan(&rows); err != nil {
		t.Fatalf("count the rows of %s: %v", table, err)
	}
	if rows != 500 || !strings.Contains(string(out), "500 rows written") {
		t.Fatalf("the embedding program wrote %d distinct records (want 500) and printed %q", rows, out)
	}
	t.Logf("built outside the module and ran in %v: %s", time.Since(started).Round(time.Millisecond), strings.TrimSpace(string(out)))
}

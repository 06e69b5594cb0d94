package integration_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// inferStdout runs `kafka2pg infer` and returns its stdout alone: it is
// the config file.
func inferStdout(t testing.TB, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), bridgeBinary(t), append([]string{"infer"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kafka2pg infer %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// catalogCounts counts the relations and schemas of the database: a check
// that writes nothing leaves both as they were.
func catalogCounts(t testing.TB, s *scenario) string {
	t.Helper()
	var rels, schemas int
	if err := s.db.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM pg_class), (SELECT count(*) FROM pg_namespace)`).Scan(&rels, &schemas); err != nil {
		t.Fatalf("count the catalog: %v", err)
	}
	return fmt.Sprintf("%d relations, %d schemas", rels, schemas)
}

// TestInferThenCheckThenRun drives issue #4 end to end: infer a config from
// JSON records, check it against a fresh database (the CREATE TABLE is
// printed, nothing is written), run it, and read the rows back typed.
func TestInferThenCheckThenRun(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	const n = 300
	var rs []*kgo.Record
	var wantCents int64
	for i := range n {
		cents := int64(i*37%10000 + 1)
		wantCents += cents
		note := ""
		if i%3 == 0 {
			note = fmt.Sprintf(`,"note":"n%d"`, i)
		}
		rs = append(rs, &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil,
			`{"id":%d,"amount":%d.%02d,"at":"2026-03-01T10:00:%02dZ","user":{"id":"123e4567-e89b-12d3-a456-%012d","vip":%v},"tags":["a","t%d"]%s}`,
			i, cents/100, cents%100, i%60, i, i%2 == 0, i%5, note)})
	}
	s.kafka.Produce(t, rs...)

	config := inferStdout(t, "--kafka-brokers", s.kafka.Brokers(), "--topic", s.topic, "--sample", "200",
		"--pg-table", s.table, "--kafka-group", s.group, "--timeout", "30s")
	t.Logf("inferred config:\n%s", config)
	for _, want := range []string{
		"{name: id, path: id, type: bigint, not_null: true}",
		"{name: amount, path: amount, type: 'numeric(20,2)', not_null: true}",
		"{name: at, path: at, type: timestamptz, not_null: true}",
		"{name: user_id, path: user.id, type: uuid, not_null: true}",
		"{name: user_vip, path: user.vip, type: boolean, not_null: true}",
		"{name: tags, path: tags, type: 'text[]', not_null: true}",
		"{name: note, path: note, type: text}",
	} {
		if !strings.Contains(config, want) {
			t.Errorf("the inferred config lacks %s", want)
		}
	}
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}

	before := catalogCounts(t, s)
	code, out := cli(t, "check", "--config", path, "--pg-url", s.pgURL)
	t.Logf("check:\n%s", out)
	if code != 0 {
		t.Fatalf("check exited %d, want 0", code)
	}
	for _, want := range []string{
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS "public"."%s" (`, s.table),
		fmt.Sprintf(`topic %q: 3 partition(s)`, s.topic),
		"kafka2pg schema: not installed",
		"check passed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check's output lacks %q", want)
		}
	}
	if after := catalogCounts(t, s); after != before {
		t.Fatalf("check wrote to the database: %s before, %s after", before, after)
	}

	failures := []struct {
		name string
		args []string
		want string
	}{
		{"a topic that does not exist", []string{"check", "--config", writeConfig(t, strings.ReplaceAll(config, "topic: "+s.topic, "topic: no-such-topic-"+s.group)), "--pg-url", s.pgURL},
			"does not exist: create it"},
		{"a missing table that run may not create", []string{"check", "--config", path, "--pg-url", s.pgURL, "--create-tables=false"},
			"creating it is off"},
		{"the schema not migrated with --migrate=false", []string{"check", "--config", path, "--pg-url", s.pgURL, "--migrate=false"},
			"--migrate=false is set"},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			code, out := cli(t, f.args...)
			if code != 1 || !strings.Contains(out, f.want) {
				t.Errorf("check exited %d, want 1 with %q; output:\n%s", code, f.want, out)
			}
		})
	}
	if code, out := cli(t, "check", "--config", writeConfig(t, config+"no-such-key: 1\n"), "--pg-url", s.pgURL); code != 2 {
		t.Errorf("check of a config with an unknown key exited %d, want 2; output:\n%s", code, out)
	}
	if after := catalogCounts(t, s); after != before {
		t.Fatalf("the failing checks wrote to the database: %s before, %s after", before, after)
	}

	b := startBridge(t, "inferred", "run", "--config", path, "--pg-url", s.pgURL, "--until-caught-up", "--metrics-addr=", "--kafka-fetch-max-wait", "250ms")
	b.requireExitZero(t, 2*time.Minute)
	var rows, ids, vips, notes, tagged int64
	var cents int64
	err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*), count(DISTINCT id), (sum(amount) * 100)::bigint,
		count(*) FILTER (WHERE user_vip), count(note), count(*) FILTER (WHERE tags[1] = 'a' AND cardinality(tags) = 2)
		FROM public.%q WHERE at >= '2026-03-01T10:00:00Z' AND user_id::text LIKE '123e4567-%%'`, s.table)).
		Scan(&rows, &ids, &cents, &vips, &notes, &tagged)
	if err != nil {
		t.Fatalf("read the rows: %v", err)
	}
	got := fmt.Sprintf("rows %d, ids %d, cents %d, vips %d, notes %d, tagged %d", rows, ids, cents, vips, notes, tagged)
	want := fmt.Sprintf("rows %d, ids %d, cents %d, vips %d, notes %d, tagged %d", n, n, wantCents, n/2, n/3, n)
	if got != want {
		t.Errorf("table %s: got %s, want %s", s.table, got, want)
	}

	code, out = cli(t, "check", "--config", path, "--pg-url", s.pgURL)
	if code != 0 || !strings.Contains(out, "exists with the columns the mapping writes") || !strings.Contains(out, "run would execute no DDL") {
		t.Errorf("check after run exited %d, want 0 with no DDL; output:\n%s", code, out)
	}
}

func writeConfig(t testing.TB, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

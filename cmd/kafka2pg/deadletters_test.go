package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/migrations"
	"github.com/kafka2pg/kafka2pg/stream"
)

func TestDeadLettersListAndReplayCommands(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	table := decode.RawTable("public", "clicks", decode.ValueJSON)
	w, err := ingest.New(pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"clicks": {Table: table, Mapper: decode.RawMapper{Format: decode.ValueJSON}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.EnsureTables(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE clicks ADD CONSTRAINT has_user CHECK (value ? 'user')`); err != nil {
		t.Fatal(err)
	}
	pos, err := w.Claim(ctx, "clicks", []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	recs := []stream.Record{
		{Topic: "clicks", Offset: 0, Value: []byte(`{"user":"a"}`)},
		{Topic: "clicks", Offset: 1, Value: []byte(`{"page":"/x"}`)}, // refused by the CHECK
		{Topic: "clicks", Offset: 2, Value: []byte(`oops`)},          // not JSON
	}
	for i := range recs {
		recs[i].Timestamp = time.Now()
	}
	if err := w.Write(ctx, &stream.Batch{Topic: "clicks", Epoch: pos[0].Epoch, PrevOffset: -1, FirstOffset: 0, NextOffset: 3, Records: recs}); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := dispatch(ctx, args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := run("dead-letters", "list", "--pg-url", url)
	if code != exitOK || !strings.Contains(out, "clicks/0@1") || !strings.Contains(out, "check_violation") || !strings.Contains(out, "invalid_json") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = run("dead-letters", "list", "--pg-url", url, "--json", "--since", "1h")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 2 {
		t.Fatalf("list --json: exit %d, %d lines:\n%s", code, len(lines), out)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first["error_kind"] == nil {
		t.Fatalf("list --json line %q: %v", lines[0], err)
	}
	if code, _, errOut := run("dead-letters", "list", "--pg-url", url, "--since", "yesterday"); code != exitUsage || !strings.Contains(errOut, "--since") {
		t.Errorf("a bad --since: exit %d, %q", code, errOut)
	}

	if _, err := pool.Exec(ctx, `ALTER TABLE clicks DROP CONSTRAINT has_user`); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run("dead-letters", "replay", "--pg-url", url, "--pg-table", "clicks", "--dry-run")
	if code != exitOK || !strings.Contains(out, "dry run: 1 would be replayed") || !strings.Contains(out, "1 the mapping still refuses") ||
		!strings.Contains(out, "clicks/0@2  invalid_json") {
		t.Fatalf("replay --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	// --kind selects the check violation alone: the other keeps its reason.
	code, out, errOut = run("dead-letters", "replay", "--pg-url", url, "--pg-table", "clicks", "--kind", "check_violation", "--limit", "5")
	if code != exitOK || !strings.Contains(out, "replayed 1 dead letter(s)") || !strings.Contains(out, "0 still refused") {
		t.Fatalf("replay --kind check_violation: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = run("dead-letters", "replay", "--pg-url", url, "--pg-table", "clicks")
	if code != exitOK || !strings.Contains(out, "replayed 0 dead letter(s)") || !strings.Contains(out, "1 still refused") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
	}
	var rows, letters int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM clicks), (SELECT count(*) FROM kafka2pg.dead_letters WHERE error_kind = 'invalid_json')`).Scan(&rows, &letters); err != nil || rows != 2 || letters != 1 {
		t.Errorf("after replay: %d rows, %d invalid_json letters (%v); want 2 and 1", rows, letters, err)
	}
	code, out, _ = run("dead-letters", "replay", "--pg-url", url, "--pg-table", "clicks", "--kind", "check_violation")
	if code != exitOK || !strings.Contains(out, "no dead letters match") {
		t.Errorf("replay of what is left of a kind: exit %d\n%s", code, out)
	}
}

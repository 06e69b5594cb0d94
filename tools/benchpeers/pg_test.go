package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestProgressOfAnUpsertTable: with updates, progress counts the records a
// sink has applied from the table's rows alone, when each partition was
// applied up to a different point (as a sink that read its partitions
// unevenly leaves it), on a real Postgres.
func TestProgressOfAnUpsertTable(t *testing.T) {
	url := os.Getenv("KAFKA2PG_TEST_PG_URL")
	if url == "" {
		t.Skip("set KAFKA2PG_TEST_PG_URL (scripts/pg-url.sh KAFKA2PG_TEST_PG_URL) to check progress on a real Postgres")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	d := &db{conn: conn, url: url}
	const table = "peers_progress_test"
	t.Cleanup(func() { _ = d.drop(context.Background(), table) })
	data := dataset{name: "updates", n: 20_000, updates: true}
	seqs := data.partitionSeqs()
	for _, upsert := range []bool{true, false} {
		if err := d.reset(ctx, table, upsert, false); err != nil {
			t.Fatal(err)
		}
		var want int64
		rows := [][]any{}
		latest := map[int64]int{} // key -> index in rows
		for p, ps := range seqs {
			cut := len(ps) * (p + 1) / (partitions + 1) // a different point per partition
			want += int64(cut)
			for _, seq := range ps[:cut] {
				id := data.id(int(seq))
				row := []any{id, seq, "u", "e", 1.5, "EUR", "DE", time.UnixMilli(tsBase + seq), "/", "r", "d", "s"}
				if i, ok := latest[id]; ok && upsert {
					rows[i] = row
					continue
				}
				latest[id] = len(rows)
				rows = append(rows, row)
			}
		}
		cols := make([]string, len(fields))
		for i, f := range fields {
			cols[i] = f.name
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows)); err != nil {
			t.Fatal(err)
		}
		// An append table of the same records is counted.
		probe := data
		probe.updates = upsert
		got, err := d.progress(ctx, table, probe)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("upsert %t: progress %d, want %d records applied", upsert, got, want)
		}
	}
}

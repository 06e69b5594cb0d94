package migrations_test

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/migrations"
)

// Version 5 stages events without their Connect schema, kept once in
// cdc_staged_schemas, and collates the queues' keys "C"; its down
// migration puts each staged key and value back together, byte for byte,
// before the schemas go, so that an earlier release applies them, marks
// the ENDs before each applier's position applied, as an earlier release
// reads them, and gives the keys the database's collation again.
func TestDownFromVersion5PutsTheStagedEventsBackTogether(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := t.Context()
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, url)
	if got := queueKeyCollations(t, conn); got != "C C C C C C" {
		t.Fatalf("the queues' key columns are collated %q, want C: byte order, not strcoll's", got)
	}
	keySchema, valueSchema := []byte(`{"type":"struct","fields":[{"type":"int64","field":"id"}]}`), []byte(`{"type":"struct","name":"v"}`)
	kd, vd := sha256.Sum256(keySchema), sha256.Sum256(valueSchema)
	if _, err := conn.Exec(ctx, `INSERT INTO kafka2pg.cdc_staged_schemas (digest, schema) VALUES ($1, $2), ($3, $4)`, kd[:], keySchema, vd[:], valueSchema); err != nil {
		t.Fatal(err)
	}
	const ins = `INSERT INTO kafka2pg.cdc_staged (consumer_group, source, txid, data_collection, collection_order, total_order,
    topic, partition, kafka_offset, key, value, key_schema, value_schema) VALUES ('g', 's', $1, 'public.a', 1, 1, 't', 0, 0, $2, $3, $4, $5)`
	if _, err := conn.Exec(ctx, ins, "split", []byte(`{"id":1}`), []byte(`{"op":"c"}`), kd[:], vd[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, ins, "whole", []byte(`7`), []byte(`{"payload":{"op":"c"},"schema":null}`), nil, nil); err != nil {
		t.Fatal(err)
	}
	// An END before its applier's position is applied, unmarked: the
	// earlier release needs its mark.
	if _, err := conn.Exec(ctx, `INSERT INTO kafka2pg.cdc_appliers (consumer_group, source, epoch, applied_tx_offset) VALUES ('g', 's', 1, 10);
INSERT INTO kafka2pg.cdc_tx_ends (consumer_group, source, txid, tx_partition, tx_offset, event_count)
VALUES ('g', 's', 'applied', 0, 5, 2), ('g', 's', 'pending', 0, 12, 2)`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Steps(ctx, url, -1); err != nil {
		t.Fatal(err)
	}
	requireVersion(t, url, 4)
	var marks string
	if err := conn.QueryRow(ctx, `SELECT string_agg(txid || '=' || coalesce(applied_events::text, 'unmarked'), ' ' ORDER BY txid)
FROM kafka2pg.cdc_tx_ends WHERE applied_at IS NOT NULL OR applied_events IS NULL`).Scan(&marks); err != nil {
		t.Fatal(err)
	}
	if marks != "applied=2 pending=unmarked" {
		t.Fatalf("ENDs after down: %s, want the one before the position marked applied whole, the other pending", marks)
	}
	want := map[string][2][]byte{
		"split": {[]byte(`{"schema":` + string(keySchema) + `,"payload":{"id":1}}`), []byte(`{"schema":` + string(valueSchema) + `,"payload":{"op":"c"}}`)},
		"whole": {[]byte(`7`), []byte(`{"payload":{"op":"c"},"schema":null}`)},
	}
	rows, err := conn.Query(ctx, `SELECT txid, key, value FROM kafka2pg.cdc_staged`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var id string
		var k, v []byte
		if err := rows.Scan(&id, &k, &v); err != nil {
			t.Fatal(err)
		}
		n++
		if w := want[id]; !bytes.Equal(k, w[0]) || !bytes.Equal(v, w[1]) {
			t.Errorf("staged %s after down: key %s value %s\nwant key %s value %s", id, k, v, w[0], w[1])
		}
	}
	if err := rows.Err(); err != nil || n != 2 {
		t.Fatalf("%d staged events after down (%v), want 2", n, err)
	}
	if got := queueKeyCollations(t, conn); got != "- - - - - -" {
		t.Fatalf("the queues' key columns are collated %q after down, want the database's", got)
	}
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatalf("up again: %v", err)
	}
	requireVersion(t, url, migrations.Latest)
}

// queueKeyCollations lists the explicit collations of the key columns of
// cdc_staged and cdc_tx_ends ("-" for the database's).
func queueKeyCollations(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(t.Context(), `SELECT string_agg(coalesce(collation_name, '-'), ' ' ORDER BY table_name, column_name)
FROM information_schema.columns
WHERE table_schema = 'kafka2pg' AND table_name IN ('cdc_staged', 'cdc_tx_ends') AND column_name IN ('consumer_group', 'source', 'txid')`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Events an earlier release staged whole stay as they are through the
// move to version 5, with no digest: the applier reads them whole.
func TestUpToVersion5KeepsEventsStagedWhole(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := t.Context()
	if err := migrations.Steps(ctx, url, 4); err != nil {
		t.Fatal(err)
	}
	requireVersion(t, url, 4)
	conn := connect(t, url)
	value := []byte(`{"schema":{"type":"struct"},"payload":{"op":"c"}}`)
	if _, err := conn.Exec(ctx, `INSERT INTO kafka2pg.cdc_staged (consumer_group, source, txid, data_collection, collection_order, total_order,
    topic, partition, kafka_offset, key, value) VALUES ('g', 's', 't1', 'public.a', 1, 1, 't', 0, 0, NULL, $1)`, value); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	requireVersion(t, url, migrations.Latest)
	var got []byte
	var digests int
	if err := conn.QueryRow(ctx, `SELECT value, num_nonnulls(key_schema, value_schema) FROM kafka2pg.cdc_staged WHERE txid = 't1'`).Scan(&got, &digests); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, value) || digests != 0 {
		t.Fatalf("after up: value %s with %d digests, want %s whole", got, digests, value)
	}
}

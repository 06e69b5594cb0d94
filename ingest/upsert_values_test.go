package ingest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// TestUpsertOneByOneWritesTheMappersOwnValues: the upsert path that applies
// a batch's operations one statement at a time (around a row Postgres
// refuses) hands the mapper's values to pgx as query arguments. pgx has no
// binary encoding of pgvalue's numerics and times of day, and sends them
// as text, their String: the rows must hold what the COPY would write.
func TestUpsertOneByOneWritesTheMappersOwnValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.MigratedPool(t)
	m, err := decode.NewJSONMapper(decode.MappingSpec{Schema: "public", Table: "prices", Key: []string{"id"},
		Columns: []decode.ColumnSpec{
			{Name: "id", Path: "id", Type: "bigint", NotNull: true},
			{Name: "amount", Path: "amount", Type: "numeric(12,2)"},
			{Name: "u", Path: "u", Type: "uuid"},
			{Name: "at", Path: "at", Type: "time"},
			{Name: "history", Path: "history", Type: "numeric[]"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := ingest.New(pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"prices": {Table: m.Table(), Mapper: m,
		Upsert: &ingest.Upsert{Key: []string{"id"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.EnsureTables(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE prices ADD CHECK (amount >= 0)`); err != nil {
		t.Fatal(err)
	}
	pos, err := w.Claim(ctx, "prices", []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	values := []string{
		`{"id":1,"amount":"12.345","u":"123e4567-e89b-12d3-a456-426614174000","at":"13:04:05.25","history":[1.5,null,"2"]}`,
		`{"id":2,"amount":-1}`, // refused by the CHECK: the batch is applied one operation at a time
		`{"id":3,"amount":99999999.99,"u":"00000000-0000-0000-0000-000000000001","at":"24:00:00","history":[]}`,
	}
	b := &stream.Batch{Topic: "prices", Epoch: pos[0].Epoch, PrevOffset: -1, NextOffset: int64(len(values))}
	for i, v := range values {
		b.Records = append(b.Records, stream.Record{Topic: "prices", Offset: int64(i), Value: []byte(v)})
	}
	res, err := trace(w).write(ctx, w, b)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Isolated || res.DeadLetters != 1 {
		t.Errorf("result = %+v, want the batch isolated around one dead letter", res)
	}
	var got string
	if err := pool.QueryRow(ctx, `SELECT string_agg(format('%s|%s|%s|%s|%s', id, amount, u, at, history), ' ' ORDER BY id) FROM prices`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint("1|12.35|123e4567-e89b-12d3-a456-426614174000|13:04:05.25|{1.5,NULL,2} ",
		"3|99999999.99|00000000-0000-0000-0000-000000000001|24:00:00|{}")
	if got != want {
		t.Errorf("table:\n got %s\nwant %s", got, want)
	}
}

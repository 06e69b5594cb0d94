package ingest_test

import (
	"context"
	"testing"
)

// TestAColumnAlteredBetweenBatchesIsWrittenWithItsNewType: the writer reads
// the column types in every batch's transaction, so a column a DBA widens
// between two batches (kafka_partition integer to bigint here, a different
// binary format) gets the new format, not the one seen before; stale types
// would fail the COPY ("insufficient data left in message") or, for some
// types, store wrong values.
func TestAColumnAlteredBetweenBatchesIsWrittenWithItsNewType(t *testing.T) {
	t.Parallel()
	w, pool := newWriter(t, "g")
	ctx := context.Background()
	pos := claim(t, w, 3)
	if err := w.Write(ctx, batch(3, pos.Epoch, 0, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE orders ALTER COLUMN kafka_partition TYPE bigint,
		ALTER COLUMN kafka_offset TYPE numeric`); err != nil {
		t.Fatal(err)
	}
	res, err := trace(w).write(ctx, w, batch(3, pos.Epoch, 100, 250))
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 150 || res.DeadLetters != 0 || res.Isolated {
		t.Fatalf("second batch: %+v, want 150 rows, no dead letter, not isolated", res)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders WHERE kafka_partition = 3 AND kafka_offset = (value->>'n')::numeric`); n != 250 {
		t.Fatalf("%d rows of 250 hold their partition and offset", n)
	}
}

package ingest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// BenchmarkWrite writes batches of 1,000 records into the zero-config table
// of a real Postgres, one transaction each (fence, COPY, COMMIT): the cost
// of the transaction around the rows, per batch and per record.
//
//	go test -run '^$' -bench Write -benchmem ./ingest/
func BenchmarkWrite(b *testing.B) {
	const rows = 1000
	w, _ := newWriter(b, "g")
	// Cancellable, as the reader's is: pgx then watches it during every
	// statement.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pos, err := w.Claim(ctx, topic, []int32{0})
	if err != nil {
		b.Fatal(err)
	}
	epoch := pos[0].Epoch
	records := make([]stream.Record, rows)
	value := []byte(`{"id":12345,"name":"a customer","amount":"12.50","tags":["a","b"]}`)
	for i := range records {
		records[i] = stream.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i)), Value: value, Timestamp: time.Unix(1764495120, 0)}
	}
	writeBatches(ctx, b, w, epoch, records)
}

// writeBatches writes b.N batches of records into partition 0 of topic,
// one after the other, and reports the time per record.
func writeBatches(ctx context.Context, b *testing.B, w *ingest.Writer, epoch int64, records []stream.Record) {
	rows := int64(len(records))
	next := int64(0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i := range records {
			records[i].Offset = next + int64(i)
		}
		bt := &stream.Batch{Topic: topic, Epoch: epoch, PrevOffset: prevOf(next), FirstOffset: next, NextOffset: next + rows, Records: records}
		if err := w.Write(ctx, bt); err != nil {
			b.Fatal(err)
		}
		next += rows
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*rows), "ns/record")
}

package ingest_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// BenchmarkUpsert writes batches of 10,000 JSON records into a typed upsert
// table keyed by id (a bigint, a numeric, a timestamptz, texts and a
// jsonb), one transaction each: with every id new, and with 9 records of
// 10 updating an id of an earlier batch. ns/record is the bridge's and
// Postgres' time together; a CPU profile shows the bridge's.
//
//	go test -run '^$' -bench Upsert -benchtime 20x -cpuprofile /tmp/cpu.out ./ingest/
func BenchmarkUpsert(b *testing.B) {
	for _, updates := range []bool{false, true} {
		b.Run(fmt.Sprintf("updates=%t", updates), func(b *testing.B) { benchmarkUpsert(b, updates) })
	}
}

func benchmarkUpsert(b *testing.B, updates bool) {
	const rows = 10000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := decode.NewJSONMapper(decode.MappingSpec{Schema: "public", Table: "events", Key: []string{"id"},
		Columns: []decode.ColumnSpec{
			{Name: "id", Path: "id", Type: "bigint", NotNull: true},
			{Name: "user_id", Path: "user_id", Type: "text"},
			{Name: "amount", Path: "amount", Type: "numeric(12,2)"},
			{Name: "country", Path: "country", Type: "text"},
			{Name: "ts", Path: "ts", Type: "timestamptz"},
			{Name: "props", Path: "props", Type: "jsonb"},
		},
		Metadata: decode.MetadataSpec{Offset: "kafka_offset"}})
	if err != nil {
		b.Fatal(err)
	}
	_, pool := pgtest.MigratedPool(b)
	w, epoch := claimed(b, pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"events": {Table: m.Table(), Mapper: m,
		Upsert: &ingest.Upsert{Key: []string{"id"}}}}}, "events")
	records := make([]stream.Record, rows)
	next := int64(0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i := range records {
			o := next + int64(i)
			id := o
			if updates && o >= rows && o%10 != 0 {
				id = int64(uint64(o)*0x9E3779B97F4A7C15>>17) % (next / 2)
			}
			records[i] = stream.Record{Topic: "events", Offset: o, Timestamp: time.Unix(1764495120, 0), Key: []byte("k"),
				Value: []byte(`{"id":` + strconv.FormatInt(id, 10) + `,"user_id":"u` + strconv.FormatInt(o%100000, 10) +
					`","amount":12.50,"country":"NL","ts":"2026-11-30T10:00:00.123Z","props":{"page":"/docs","device":"ios","ab":"x1"}}`)}
		}
		bt := &stream.Batch{Topic: "events", Epoch: epoch, PrevOffset: prevOf(next), FirstOffset: next, NextOffset: next + rows, Records: records}
		if err := w.Write(ctx, bt); err != nil {
			b.Fatal(err)
		}
		next += rows
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/record")
}

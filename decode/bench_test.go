package decode

import (
	"fmt"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/stream"
)

// benchValues are ~250-byte JSON records like the bench's.
func benchValues(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"id":%d,"user_id":"u%05d","event":"page_view","amount":%d.%02d,"currency":"EUR","country":"DE",`+
			`"ts":"2026-11-30T09:%02d:%02dZ","props":{"path":"/docs/%d","ref":"newsletter","device":"mobile","ab":"b","lang":"de"}}`,
			i, i%50000, i%1000, i%100, i%60, i%60, i%100)
	}
	return out
}

func benchRecords(values [][]byte) []stream.Record {
	recs := make([]stream.Record, len(values))
	for i, v := range values {
		recs[i] = stream.Record{Topic: "events", Partition: int32(i % 8), Offset: int64(i), Timestamp: time.Unix(1764495120, 0),
			Key: []byte("k"), Value: v, Headers: []stream.Header{{Key: "source", Value: []byte("bench")}}}
	}
	return recs
}

// BenchmarkRawMapperRow: decode checks and row building per record for the
// zero-config table (the value is validated, not decoded).
func BenchmarkRawMapperRow(b *testing.B) {
	recs := benchRecords(benchValues(1024))
	m := RawMapper{Format: ValueJSON}
	var row []any
	b.ReportAllocs()
	b.SetBytes(int64(len(recs[0].Value)))
	b.ResetTimer()
	for i := range b.N {
		var err error
		row, err = m.Row(&recs[i%len(recs)], row)
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJSONMapperRow: decode and row building per record for a typed
// table of ten columns.
func BenchmarkJSONMapperRow(b *testing.B) {
	recs := benchRecords(benchValues(1024))
	m, err := NewJSONMapper(benchSpec())
	if err != nil {
		b.Fatal(err)
	}
	var row []any
	b.ReportAllocs()
	b.SetBytes(int64(len(recs[0].Value)))
	b.ResetTimer()
	for i := range b.N {
		row, err = m.Row(&recs[i%len(recs)], row)
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchSpec is the typed table of the benchmarks: ten columns.
func benchSpec() MappingSpec {
	return MappingSpec{Table: "events", Columns: []ColumnSpec{
		{Name: "id", Path: "id", Type: "bigint", NotNull: true},
		{Name: "user_id", Path: "user_id", Type: "text"},
		{Name: "event", Path: "event", Type: "text"},
		{Name: "amount", Path: "amount", Type: "numeric(12,2)"},
		{Name: "currency", Path: "currency", Type: "varchar(3)"},
		{Name: "country", Path: "country", Type: "text"},
		{Name: "ts", Path: "ts", Type: "timestamptz"},
		{Name: "path", Path: "props.path", Type: "text"},
		{Name: "device", Path: "props.device", Type: "text"},
		{Name: "props", Path: "props", Type: "jsonb"},
	}}
}

// BenchmarkJSONMapperAppendRow: decode and binary COPY encoding per record
// for the same table, straight from the record (what ingest's fast path
// runs); compare with BenchmarkJSONMapperRow plus ingest's
// BenchmarkCopyEncode.
func BenchmarkJSONMapperAppendRow(b *testing.B) {
	recs := benchRecords(benchValues(1024))
	m, err := NewJSONMapper(benchSpec())
	if err != nil {
		b.Fatal(err)
	}
	oids := make([]uint32, len(m.cols))
	for i, c := range m.cols {
		oids[i] = c.oid
	}
	enc := func(col int, dst []byte, v any) ([]byte, error) {
		b.Fatalf("column %d left to the encoder", col)
		return dst, nil
	}
	buf := make([]byte, 0, 1<<20)
	b.ReportAllocs()
	b.SetBytes(int64(len(recs[0].Value)))
	b.ResetTimer()
	for i := range b.N {
		if len(buf) > 1<<19 {
			buf = buf[:0]
		}
		buf, err = m.AppendRow(&recs[i%len(recs)], buf, oids, enc)
		if err != nil {
			b.Fatal(err)
		}
	}
}

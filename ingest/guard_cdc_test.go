package ingest_test

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/sinkstest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// srcEv is a Debezium change event of customers with a source block:
// its op, the key's id, the after row's name ("" with op d) and
// Postgres' sequence [commit, lsn] (0 commit: null).
type srcEv struct {
	op         string
	id         int
	name       string
	commit, at int
}

func (e srcEv) record(offset int64, ts time.Time) stream.Record {
	r := stream.Record{Topic: "customers", Offset: offset, Timestamp: ts,
		Key: fmt.Appendf(nil, `{"schema":%s,"payload":{"id":%d}}`, custKeySchema, e.id)}
	commit := "null"
	if e.commit != 0 {
		commit = fmt.Sprintf(`\"%d\"`, e.commit)
	}
	source := fmt.Sprintf(`{"connector":"postgresql","lsn":%d,"sequence":"[%s,\"%d\"]"}`, e.at, commit, e.at)
	before, after := "null", fmt.Sprintf(`{"id":%d,"name":%q,"qty":1}`, e.id, e.name)
	if e.op == "d" {
		before, after = fmt.Sprintf(`{"id":%d,"name":null,"qty":null}`, e.id), "null"
	}
	r.Value = fmt.Appendf(nil, `{"schema":%s,"payload":{"before":%s,"after":%s,"op":%q,"ts_ms":1,"source":%s}}`,
		custValueSchema(custFields), before, after, e.op, source)
	return r
}

// debeziumGuardedSink is a format debezium sink of topic customers with
// delete soft and version src_version, built from its YAML.
func debeziumGuardedSink(t *testing.T) ingest.Sink {
	t.Helper()
	set, _ := sinkstest.Build(t, "sinks:\n  - {topic: customers, format: debezium, delete: soft, version: src_version}\n")
	return set.Fixed["customers"]
}

// customersBatch is a batch of topic customers, partition 0, from first,
// each record at ts.
func customersBatch(epoch, first int64, ts time.Time, evs ...srcEv) *stream.Batch {
	b := &stream.Batch{Topic: "customers", Epoch: epoch, PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + int64(len(evs))}
	for i, ev := range evs {
		b.Records = append(b.Records, ev.record(first+int64(i), ts))
	}
	return b
}

// The batch redone change by change, after Postgres refused a change,
// keeps the guard of a debezium sink: the late read is skipped and
// counted, the delete marks its row.
func TestDebeziumVersionGuardHoldsChangeByChange(t *testing.T) {
	t.Parallel()
	w, pool, e, stale := itemsWriterOf(t, "customers", debeziumGuardedSink(t))
	t1 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	write(t, w, customersBatch(e[0], 0, t1, srcEv{"c", 1, "a", 100, 110}, srcEv{"c", 2, "b", 100, 120}))
	refuseNamed(t, pool, "customers")
	write(t, w, customersBatch(e[0], 2, t1, srcEv{"c", 3, "refused", 200, 210}, srcEv{"r", 1, "snap", 0, 60}, srcEv{"d", 2, "", 200, 220}))
	var got string
	q := `SELECT string_agg(id || '=' || name || ':' || (deleted_at IS NOT NULL), ' ' ORDER BY id) FROM customers`
	if err := pool.QueryRow(context.Background(), q).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "1=a:false 2=b:true"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
	wantCounts(t, pool, stale, 1, 1) // the late read; the refused change
}

// A debezium sink with delete soft and version: deletes mark rows, a
// snapshot read that arrives after a streamed change loses to it, an
// older update does not undo a delete, a newer create brings the row
// back, and a second delete marks it with its own timestamp.
func TestDebeziumSoftDeletesAndTheSourceVersion(t *testing.T) {
	t.Parallel()
	w, pool, e, stale := itemsWriterOf(t, "customers", debeziumGuardedSink(t))
	t1 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	next := int64(0)
	batch := func(ts time.Time, evs ...srcEv) *stream.Batch {
		b := customersBatch(e[0], next, ts, evs...)
		next = b.NextOffset
		return b
	}
	state := func() string {
		t.Helper()
		var s string
		q := `SELECT string_agg(id || '=' || coalesce(name, 'NULL') || ':' || coalesce(to_char(deleted_at AT TIME ZONE 'UTC', 'HH24:MI'), 'live') || ':' || src_version, ' ' ORDER BY id) FROM customers`
		if err := pool.QueryRow(context.Background(), q).Scan(&s); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return s
	}
	steps := []struct {
		b     *stream.Batch
		want  string
		stale int
	}{
		{batch(t1, srcEv{"r", 2, "snap", 0, 50}, srcEv{"c", 1, "a", 100, 110}),
			"1=a:live:" + seqVersion(100, 110) + " 2=snap:live:0", 0},
		// The update of 1 and the delete of 2, then, in the same batch, a
		// snapshot read of 1 that arrives after its update: it loses.
		{batch(t1, srcEv{"u", 1, "b", 200, 210}, srcEv{"d", 2, "", 200, 220}, srcEv{"r", 1, "snap", 0, 60}),
			"1=b:live:" + seqVersion(200, 210) + " 2=snap:03:04:" + seqVersion(200, 220), 1},
		// In a batch of its own, the late read loses to the stored row too.
		{batch(t1, srcEv{"r", 1, "snap", 0, 60}), "1=b:live:" + seqVersion(200, 210) + " 2=snap:03:04:" + seqVersion(200, 220), 1},
		// An older update of the deleted row does not bring it back.
		{batch(t2, srcEv{"u", 2, "old", 150, 160}), "1=b:live:" + seqVersion(200, 210) + " 2=snap:03:04:" + seqVersion(200, 220), 1},
		// A newer create does; the next delete marks it with its own time.
		{batch(t2, srcEv{"c", 2, "again", 300, 310}), "1=b:live:" + seqVersion(200, 210) + " 2=again:live:" + seqVersion(300, 310), 0},
		{batch(t2, srcEv{"d", 2, "", 400, 410}), "1=b:live:" + seqVersion(200, 210) + " 2=again:04:04:" + seqVersion(400, 410), 0},
	}
	total := 0
	for i, s := range steps {
		write(t, w, s.b)
		total += s.stale
		if got := state(); got != s.want {
			t.Fatalf("step %d: %s\nwant %s", i, got, s.want)
		}
		if got := stale.get(); got != total {
			t.Fatalf("step %d: %d stale changes counted, want %d", i, got, total)
		}
	}
}

// seqVersion is the version of sequence [commit, lsn]: commit × 2^64 + lsn.
func seqVersion(commit, lsn int64) string {
	n := new(big.Int).Lsh(big.NewInt(commit), 64)
	return n.Add(n, big.NewInt(lsn)).String()
}

package ingest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/stream"
)

// checkedOnly hides RawMapper's AppendRowUnchecked: a writer with it checks
// every value before the COPY, as kafka2pg did before it left the checks
// jsonb makes to Postgres.
type checkedOnly struct{ m decode.RawMapper }

func (c checkedOnly) Row(r *stream.Record, dst []any) ([]any, error) { return c.m.Row(r, dst) }

func (c checkedOnly) AppendRow(r *stream.Record, dst []byte, oids []uint32, enc pgcopy.FieldEncoder) ([]byte, error) {
	return c.m.AppendRow(r, dst, oids, enc)
}

var _ ingest.UncheckedAppender = decode.RawMapper{}

// badJSON are values jsonb refuses, by offset in a batch of 100.
var badJSON = map[int64]string{
	10: `{"n":`,                                                 // not JSON
	20: `"\u0000"`,                                              // jsonb cannot store it
	30: `["\ud800"]`,                                            // a lone surrogate
	40: "{\"s\":\"\xff\"}",                                      // not UTF-8
	50: `{"n":1e1000000}`,                                       // JSON, but over numeric's range: only Postgres knows
	60: strings.Repeat("[", 10001) + strings.Repeat("]", 10001), // deeper than encoding/json goes
	70: "\"a\x00b\"",                                            // a control character in a string
	80: ``,                                                      // empty
}

type deadLetter struct{ kind, message string }

func deadLettersOf(t *testing.T, pool *pgxpool.Pool, p int32) map[int64]deadLetter {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT kafka_offset, error_kind, error_message FROM kafka2pg.dead_letters WHERE partition = $1`, p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]deadLetter{}
	var o int64
	var d deadLetter
	if _, err := pgx.ForEachRow(rows, []any{&o, &d.kind, &d.message}, func() error { out[o] = d; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// A batch written unchecked whose rows Postgres refuses ends as it ended
// when every value was checked first: the same rows, the same dead letters
// with the same kinds and messages.
func TestUncheckedRowsPostgresRefusesGetTheMappingsDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newWriter(t, "g")
	unchecked := writerWith(t, pool, ingest.Config{})
	checked, err := ingest.New(pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{topic: {
		Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: checkedOnly{decode.RawMapper{Format: decode.ValueJSON}}}}})
	if _, ok := any(checkedOnly{}).(ingest.UncheckedAppender); ok {
		t.Fatal("checkedOnly is an UncheckedAppender")
	}
	if err != nil {
		t.Fatal(err)
	}
	results := map[int32]ingest.BatchTrace{}
	for p, w := range map[int32]*ingest.Writer{0: unchecked, 1: checked} {
		b := batch(p, claim(t, w, p).Epoch, 0, 100)
		for o, v := range badJSON {
			b.Records[o].Value = []byte(v)
		}
		if results[p], err = trace(w).write(ctx, w, b); err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
	}
	if !results[0].Rechecked || results[1].Rechecked {
		t.Errorf("Rechecked: unchecked writer %v, checked writer %v; want true, false", results[0].Rechecked, results[1].Rechecked)
	}
	got, want := deadLettersOf(t, pool, 0), deadLettersOf(t, pool, 1)
	if len(want) != len(badJSON) {
		t.Fatalf("the checked writer dead-lettered %d records, want %d: %v", len(want), len(badJSON), want)
	}
	for o, d := range want {
		// The messages name the partition: orders/1@10 against orders/0@10.
		d.message = strings.Replace(d.message, topic+"/1@", topic+"/0@", 1)
		if got[o] != d {
			t.Errorf("offset %d: dead letter %+v, want %+v", o, got[o], d)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d dead letters, want %d", len(got), len(want))
	}
	for p := range int32(2) {
		if n := queryInt(t, pool, `SELECT count(*) FROM orders WHERE kafka_partition = $1`, p); n != int64(100-len(badJSON)) {
			t.Errorf("partition %d: %d rows, want %d", p, n, 100-len(badJSON))
		}
		if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE partition = $1`, p); n != 100 {
			t.Errorf("partition %d: next_offset %d, want 100", p, n)
		}
	}
}

// After Postgres refuses a row of an unchecked batch, the topic's batches
// are checked until RecheckBatches of them in a row had no bad record.
func TestATopicWithABadRecordIsCheckedForItsNextBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, pool := newWriter(t, "g")
	epoch := claim(t, w, 0).Epoch
	next := int64(0)
	tr := trace(w)
	write := func(bad bool) ingest.BatchTrace {
		t.Helper()
		b := batch(0, epoch, next, next+10)
		if bad {
			b.Records[3].Value = []byte(`{"n":`)
		}
		next += 10
		res, err := tr.write(ctx, w, b)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	step := func(what string, bad, wantRechecked bool) {
		t.Helper()
		if res := write(bad); res.Rechecked != wantRechecked {
			t.Errorf("%s: Rechecked %v, want %v", what, res.Rechecked, wantRechecked)
		}
	}
	step("a clean batch", false, false)
	step("the first bad batch, unchecked", true, true)
	for range ingest.RecheckBatches - 1 {
		write(false)
	}
	step("a bad batch after one clean batch too few", true, false)
	for range ingest.RecheckBatches - 1 {
		write(false)
	}
	step("a bad batch after one clean batch too few since the last bad one", true, false)
	for range ingest.RecheckBatches {
		write(false)
	}
	step("a bad batch after enough clean ones, unchecked again", true, true)
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != 4 {
		t.Errorf("%d dead letters, want 4", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders`); n != next-4 {
		t.Errorf("%d rows, want %d", n, next-4)
	}
}

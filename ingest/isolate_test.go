package ingest_test

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/stream"
)

func writerWith(t *testing.T, pool *pgxpool.Pool, cfg ingest.Config) *ingest.Writer {
	t.Helper()
	cfg.Group = "g"
	cfg.Sinks = map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}
	w, err := ingest.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func deadLetterKinds(t *testing.T, pool *pgxpool.Pool) map[int64]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT kafka_offset, error_kind FROM kafka2pg.dead_letters`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	var o int64
	var k string
	if _, err := pgx.ForEachRow(rows, []any{&o, &k}, func() error { out[o] = k; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRowsPostgresRefusesAreIsolatedAndTheRestLands(t *testing.T) {
	t.Parallel()
	w, pool := newWriter(t, "g")
	ctx := context.Background()
	for _, ddl := range []string{
		`ALTER TABLE orders ADD CONSTRAINT n_not_3_mod_7 CHECK ((value->>'n')::int % 7 <> 3)`,
		`ALTER TABLE orders ALTER COLUMN kafka_key SET NOT NULL`,
		`CREATE UNIQUE INDEX orders_ref ON orders ((value->>'ref'))`,
	} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	c := claim(t, w, 0)
	b := batch(0, c.Epoch, 0, 100)
	want := map[int64]string{}
	for i := range b.Records {
		if i%7 == 3 {
			want[int64(i)] = "check_violation"
		}
	}
	b.Records[50].Key = nil
	want[50] = "not_null_violation"
	b.Records[60].Value = []byte(`{"n":60,"ref":"dup"}`)
	b.Records[61].Value = []byte(`{"n":61,"ref":"dup"}`)
	want[61] = "unique_violation"
	b.Records[62].Value = []byte(`{"n":1e1000000}`)
	want[62] = "numeric_value_out_of_range"
	b.Records[63].Value = []byte(`{"n":"x"}`)
	want[63] = "invalid_text_representation"
	b.Records[64].Value = []byte(`{"n":`)
	want[64] = decode.KindInvalidJSON
	// An indexed value over btree's 2,704 bytes (6,400 hex digits that do
	// not compress under it): SQLSTATE 54000.
	long := make([]byte, 0, 6400)
	for i := range 200 {
		long = fmt.Appendf(long, "%x", md5.Sum([]byte(strconv.Itoa(i))))
	}
	b.Records[65].Value = []byte(`{"n":65,"ref":"` + string(long) + `"}`)
	want[65] = "program_limit_exceeded"
	res, err := trace(w).write(ctx, w, b)
	if err != nil {
		t.Fatal(err)
	}
	got := deadLetterKinds(t, pool)
	for o, kind := range want {
		if got[o] != kind {
			t.Errorf("offset %d: dead letter kind %q, want %q", o, got[o], kind)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d dead letters, want %d: %v", len(got), len(want), got)
	}
	rows := queryInt(t, pool, `SELECT count(*) FROM orders`)
	if rows != int64(100-len(want)) || res.Rows != 100-len(want) || res.DeadLetters != len(want) {
		t.Errorf("rows in table %d, result %+v; want %d rows and %d dead letters", rows, res, 100-len(want), len(want))
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE partition = 0`); n != 100 {
		t.Errorf("next_offset = %d, want 100", n)
	}
}

func TestOnErrorStopCommitsOnlyWhatComesBeforeTheBadRecord(t *testing.T) {
	t.Parallel()
	_, pool := newWriter(t, "g")
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `ALTER TABLE orders ADD CHECK ((value->>'n')::int <> 7)`); err != nil {
		t.Fatal(err)
	}
	w := writerWith(t, pool, ingest.Config{OnError: ingest.OnErrorStop})
	c := claim(t, w, 0)
	b := batch(0, c.Epoch, 0, 20)
	b.Records[12].Value = []byte("not json") // a later bad record: the first one decides
	err := w.Write(ctx, b)
	var stop *stream.StopError
	if !errors.As(err, &stop) || stop.Offset != 7 || stop.Kind != "check_violation" {
		t.Fatalf("Write = %v, want a StopError at offset 7 (check_violation)", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders`); n != 7 {
		t.Errorf("rows = %d, want 7 (offsets 0-6)", n)
	}
	if n := queryInt(t, pool, `SELECT max(kafka_offset) FROM orders`); n != 6 {
		t.Errorf("max offset = %d, want 6", n)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE partition = 0`); n != 7 {
		t.Errorf("next_offset = %d, want 7: nothing past the bad record may be committed", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != 0 {
		t.Errorf("%d dead letters with --on-error=stop, want 0", n)
	}

	// A decode error first in the batch: nothing at all is committed but the stop.
	b = batch(0, c.Epoch, 7, 9)
	b.Records[0].Value = []byte("{")
	err = w.Write(ctx, b)
	if !errors.As(err, &stop) || stop.Offset != 7 || stop.Kind != decode.KindInvalidJSON {
		t.Fatalf("Write = %v, want a StopError at offset 7 (invalid_json)", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders`); n != 7 {
		t.Errorf("rows = %d, want still 7", n)
	}
}

func TestOnErrorSkipCountsAndWritesNoDeadLetters(t *testing.T) {
	t.Parallel()
	_, pool := newWriter(t, "g")
	ctx := context.Background()
	w := writerWith(t, pool, ingest.Config{OnError: ingest.OnErrorSkip, MaxRecordBytes: 64})
	c := claim(t, w, 0)
	b := batch(0, c.Epoch, 0, 10)
	b.Records[2].Value = []byte("nope")
	b.Records[4].Value = []byte(`{"big":"` + string(make([]byte, 100)) + `"}`)
	res, err := trace(w).write(ctx, w, b)
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 2 || res.Rows != 8 || res.DeadLetters != 0 {
		t.Errorf("result %+v, want 8 rows and 2 skipped", res)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != 0 {
		t.Errorf("%d dead letters with --on-error=skip, want 0", n)
	}
}

func TestRecordsOverTheSizeLimitAreDeadLettered(t *testing.T) {
	t.Parallel()
	_, pool := newWriter(t, "g")
	w := writerWith(t, pool, ingest.Config{MaxRecordBytes: 64})
	c := claim(t, w, 0)
	b := batch(0, c.Epoch, 0, 3)
	b.Records[1].Value = []byte(`{"pad":"` + string(make([]byte, 80)) + `"}`)
	if err := w.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if got := deadLetterKinds(t, pool); got[1] != ingest.KindTooLarge || len(got) != 1 {
		t.Errorf("dead letters = %v, want offset 1 as %s", got, ingest.KindTooLarge)
	}
}

func TestAReadOnlyDatabaseIsRetriedNeverDeadLettered(t *testing.T) {
	t.Parallel()
	w, pool := newWriter(t, "g")
	ctx := context.Background()
	c := claim(t, w, 0)
	var db string
	if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	pool.Reset() // new connections see the setting
	err := w.Write(ctx, batch(0, c.Epoch, 0, 5))
	if err == nil || !ingest.Retryable(err) || errors.Is(err, stream.ErrFenced) {
		t.Fatalf("Write on a read-only database = %v, want a retryable error", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{"SET default_transaction_read_only = off", "ALTER DATABASE " + pgx.Identifier{db}.Sanitize() + " RESET default_transaction_read_only"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	conn.Release()
	pool.Reset()
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != 0 {
		t.Errorf("%d dead letters for a read-only database, want 0", n)
	}
	if err := w.Write(ctx, batch(0, c.Epoch, 0, 5)); err != nil {
		t.Fatalf("Write after the database is writable again: %v", err)
	}
}

func TestReplayWritesWhatNowFitsAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	w, pool := newWriter(t, "g")
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `ALTER TABLE orders ADD CONSTRAINT small CHECK ((value->>'n')::int < 5)`); err != nil {
		t.Fatal(err)
	}
	c := claim(t, w, 0)
	b := batch(0, c.Epoch, 0, 10)
	b.Records[8].Value = []byte("still not json")
	b.Records[9].Headers = []stream.Header{{Key: "trace", Value: []byte{1, 2}}}
	if err := w.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != 5 {
		t.Fatalf("dead letters = %d, want 5 (offsets 5-9)", n)
	}
	// The user fixes the table, then replays.
	if _, err := pool.Exec(ctx, `ALTER TABLE orders DROP CONSTRAINT small`); err != nil {
		t.Fatal(err)
	}
	res, err := w.Replay(ctx, deadletters.Filter{Topics: []string{topic}}, ingest.ReplayOptions{BatchSize: 2}) // small batches: several transactions
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed != 4 || res.StillBad != 1 {
		t.Errorf("replay = %+v, want 4 replayed and 1 still bad", res)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders`); n != 9 {
		t.Errorf("rows = %d, want 9", n)
	}
	if got := deadLetterKinds(t, pool); len(got) != 1 || got[8] != decode.KindInvalidJSON {
		t.Errorf("dead letters left = %v, want only offset 8 (invalid_json)", got)
	}
	var headers string
	if err := pool.QueryRow(ctx, `SELECT kafka_headers::text FROM orders WHERE kafka_offset = 9`).Scan(&headers); err != nil {
		t.Fatal(err)
	}
	if headers != `[{"key": "trace", "value": "\u0001\u0002"}]` {
		t.Errorf("replayed headers = %s", headers)
	}
}

func TestHostileTableNamesAreQuotedNeverInterpolated(t *testing.T) {
	t.Parallel()
	_, pool := newWriter(t, "g")
	ctx := context.Background()
	for _, name := range []string{`we"ird; DROP TABLE orders; --`, "Ünïcödé tåble", "select", "with space"} {
		w, err := ingest.New(pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{topic: {
			Table: decode.RawTable("public", name, decode.ValueText), Mapper: decode.RawMapper{Format: decode.ValueText}}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.EnsureTables(ctx, true); err != nil {
			t.Fatalf("table %q: %v", name, err)
		}
		c := claim(t, w, 0)
		start := max(c.NextOffset, 0)
		if err := w.Write(ctx, batch(0, c.Epoch, start, start+3)); err != nil {
			t.Fatalf("table %q: %v", name, err)
		}
		if n := queryInt(t, pool, `SELECT count(*) FROM `+pgx.Identifier{"public", name}.Sanitize()); n != 3 {
			t.Errorf("table %q holds %d rows, want 3", name, n)
		}
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM pg_tables WHERE tablename = 'orders'`); n != 1 {
		t.Error("a hostile table name dropped the orders table")
	}
}

func TestNotifyAnnouncesCommittedBatchesOnly(t *testing.T) {
	t.Parallel()
	_, pool := newWriter(t, "g")
	ctx := context.Background()
	w := writerWith(t, pool, ingest.Config{Notify: true})
	listener, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	channel := ingest.NotifyChannel(decode.RawTable("public", topic, decode.ValueJSON))
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	c := claim(t, w, 2)
	if err := w.Write(ctx, batch(2, c.Epoch, 0, 5)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := listener.Conn().WaitForNotification(wctx)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(n.Payload), &got); err != nil {
		t.Fatal(err)
	}
	if got["partition"] != float64(2) || got["first_offset"] != float64(0) || got["last_offset"] != float64(4) || got["rows"] != float64(5) {
		t.Errorf("payload = %s", n.Payload)
	}
	// A fenced batch is rolled back: no notification.
	claim(t, w, 2)
	if err := w.Write(ctx, batch(2, c.Epoch, 5, 8)); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("Write = %v, want ErrFenced", err)
	}
	sctx, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if n, err := listener.Conn().WaitForNotification(sctx); err == nil {
		t.Errorf("a rolled-back batch was announced: %s", n.Payload)
	}
}

func TestUnreadableRecordsAreDeadLettersAStopOrLeftByAReplay(t *testing.T) {
	t.Parallel()
	_, pool := newWriter(t, "g")
	ctx := t.Context()
	w := writerWith(t, pool, ingest.Config{})
	c := claim(t, w, 0)
	tooBig := errors.New("the record batch of offsets 3 to 6 decompresses to more than 64 bytes")
	b := batch(0, c.Epoch, 0, 10)
	for i := 3; i <= 6; i++ {
		b.Records[i] = stream.Record{Topic: topic, Partition: 0, Offset: int64(i), Unreadable: tooBig}
	}
	if err := w.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders`); n != 6 {
		t.Errorf("%d rows, want the 6 readable records", n)
	}
	kinds := deadLetterKinds(t, pool)
	for o := int64(3); o <= 6; o++ {
		if kinds[o] != ingest.KindBatchTooLarge {
			t.Errorf("dead letter of offset %d: kind %q, want %q (all: %v)", o, kinds[o], ingest.KindBatchTooLarge, kinds)
		}
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE partition = 0`); n != 10 {
		t.Errorf("next_offset = %d, want 10: every offset is a row or a dead letter", n)
	}
	rr, err := w.Replay(ctx, deadletters.Filter{Topics: []string{topic}}, ingest.ReplayOptions{BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Replayed != 0 || rr.Kept != 4 {
		t.Errorf("replay %+v, want nothing replayed and 4 kept: an unread record has no value to write", rr)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters WHERE error_kind = $1`, ingest.KindBatchTooLarge); n != 4 {
		t.Errorf("%d dead letters of kind %s after the replay, want 4", n, ingest.KindBatchTooLarge)
	}

	stopper := writerWith(t, pool, ingest.Config{OnError: ingest.OnErrorStop})
	c = claim(t, stopper, 0)
	b = batch(0, c.Epoch, 10, 12)
	b.Records[1] = stream.Record{Topic: topic, Partition: 0, Offset: 11, Unreadable: tooBig}
	err = stopper.Write(ctx, b)
	var stop *stream.StopError
	if !errors.As(err, &stop) || stop.Offset != 11 || stop.Kind != ingest.KindBatchTooLarge || !errors.Is(stop.Err, tooBig) {
		t.Fatalf("Write = %v, want a StopError at offset 11 of kind %s", err, ingest.KindBatchTooLarge)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE partition = 0`); n != 11 {
		t.Errorf("next_offset = %d, want 11", n)
	}
}

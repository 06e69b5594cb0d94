package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

const topic = "orders"

// newWriter migrates a fresh database and returns a Writer into the
// zero-config table "orders" with jsonb values.
func newWriter(t testing.TB, group string) (*ingest.Writer, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	_, pool := pgtest.MigratedPool(t)
	w := writerOn(t, pool, group)
	if err := w.EnsureTables(ctx, true); err != nil {
		t.Fatal(err)
	}
	return w, pool
}

// readyWriter is a Writer of cfg on pool, its tables created.
func readyWriter(t testing.TB, pool *pgxpool.Pool, cfg ingest.Config) *ingest.Writer {
	t.Helper()
	w, err := ingest.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.EnsureTables(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return w
}

// claimed is readyWriter with partition 0 of topic claimed: its epoch.
func claimed(t testing.TB, pool *pgxpool.Pool, cfg ingest.Config, topic string) (*ingest.Writer, int64) {
	t.Helper()
	w := readyWriter(t, pool, cfg)
	pos, err := w.Claim(context.Background(), topic, []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	return w, pos[0].Epoch
}

// rowsOf is table's rows as "id=a:b ...", by id, NULL for a null.
func rowsOf(t *testing.T, pool *pgxpool.Pool, table, a, b string) string {
	t.Helper()
	q := fmt.Sprintf(`SELECT coalesce(string_agg(id || '=' || coalesce(%[2]s::text, 'NULL') || ':' || coalesce(%[3]s::text, 'NULL'), ' ' ORDER BY id), '') FROM %[1]s`,
		pgx.Identifier{table}.Sanitize(), pgx.Identifier{a}.Sanitize(), pgx.Identifier{b}.Sanitize())
	var s string
	if err := pool.QueryRow(context.Background(), q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s
}

func writerOn(t testing.TB, pool *pgxpool.Pool, group string) *ingest.Writer {
	t.Helper()
	w, err := ingest.New(pool, ingest.Config{
		Group:            group,
		Sinks:            map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}},
		ClaimLockTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func claim(t *testing.T, w *ingest.Writer, p int32) stream.Position {
	t.Helper()
	pos, err := w.Claim(context.Background(), topic, []int32{p})
	if err != nil {
		t.Fatal(err)
	}
	return pos[p]
}

// prevOf is the stored position a writer of consecutive batches from
// offset 0 expects before the batch that starts at first: nothing stored
// before the first batch, first itself after it.
func prevOf(first int64) int64 {
	if first == 0 {
		return -1
	}
	return first
}

// batch is a batch of partition p from first to next of consecutive
// records, written after the one that ended at first (prevOf).
func batch(p int32, epoch, first, next int64) *stream.Batch {
	b := &stream.Batch{Topic: topic, Partition: p, Epoch: epoch, PrevOffset: prevOf(first), FirstOffset: first, NextOffset: next, LeaderEpoch: 0}
	for o := first; o < next; o++ {
		b.Records = append(b.Records, stream.Record{Topic: topic, Partition: p, Offset: o, Timestamp: time.Unix(1764495120, 0),
			Key: []byte("k"), Value: []byte(`{"n":` + strconv.FormatInt(o, 10) + `}`)})
	}
	return b
}

func queryInt(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestTwoWritersOnOnePartitionOneIsFenced(t *testing.T) {
	t.Parallel()
	w, pool := newWriter(t, "g")
	ctx := context.Background()
	a := claim(t, w, 0)
	if err := w.Write(ctx, batch(0, a.Epoch, 0, 100)); err != nil {
		t.Fatal(err)
	}
	b := claim(t, w, 0) // B takes over: A is fenced from now on
	if b.NextOffset != 100 {
		t.Fatalf("B resumes at %d, want 100", b.NextOffset)
	}
	err := w.Write(ctx, batch(0, a.Epoch, 100, 200))
	var fe *stream.FencedError
	if !errors.Is(err, stream.ErrFenced) || !errors.As(err, &fe) || fe.StoredEpoch != b.Epoch {
		t.Fatalf("A's write after B's claim = %v, want ErrFenced naming epoch %d", err, b.Epoch)
	}
	if err := w.Write(ctx, batch(0, b.Epoch, 100, 200)); err != nil {
		t.Fatalf("B's write: %v", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders`); n != 200 {
		t.Errorf("rows = %d, want 200", n)
	}
	if n := queryInt(t, pool, `SELECT count(DISTINCT kafka_offset) FROM orders`); n != 200 {
		t.Errorf("distinct offsets = %d, want 200", n)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE consumer_group='g' AND topic=$1 AND partition=0`, topic); n != 200 {
		t.Errorf("next_offset = %d, want 200", n)
	}
}

func TestTheGuardRefusesRewritesAndAcceptsGaps(t *testing.T) {
	t.Parallel()
	w, pool := newWriter(t, "g")
	ctx := context.Background()
	c := claim(t, w, 3)
	if err := w.Write(ctx, batch(3, c.Epoch, 0, 10)); err != nil {
		t.Fatal(err)
	}
	// The same epoch re-sending an overlapping span (an ambiguous commit
	// retried blindly) must not land twice.
	if err := w.Write(ctx, batch(3, c.Epoch, 5, 15)); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("overlapping rewrite = %v, want ErrFenced", err)
	}
	// Offsets skip after compaction and transaction markers: a gap is fine.
	gap := batch(3, c.Epoch, 12, 20)
	gap.PrevOffset = 10
	if err := w.Write(ctx, gap); err != nil {
		t.Fatalf("write after a gap: %v", err)
	}
	// A span of markers only advances the offset.
	if err := w.Write(ctx, &stream.Batch{Topic: topic, Partition: 3, Epoch: c.Epoch, PrevOffset: 20, FirstOffset: 20, NextOffset: 22}); err != nil {
		t.Fatalf("marker-only span: %v", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM orders WHERE kafka_partition = 3`); n != 18 {
		t.Errorf("rows = %d, want 18 (0-9 and 12-19)", n)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE partition = 3`); n != 22 {
		t.Errorf("next_offset = %d, want 22", n)
	}
}

func TestBadRecordsAreDeadLetteredInTheSameTransaction(t *testing.T) {
	t.Parallel()
	w, pool := newWriter(t, "g")
	ctx := context.Background()
	c := claim(t, w, 1)
	b := batch(1, c.Epoch, 0, 5)
	b.Records[1].Value = []byte(`{"broken":`)
	b.Records[3].Value = []byte(`{"nul":"\u0000"}`)
	res, err := trace(w).write(ctx, w, b)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 3 || res.DeadLetters != 2 {
		t.Fatalf("result = %+v, want 3 rows and 2 dead letters", res)
	}
	rows, err := pool.Query(ctx, `SELECT kafka_offset, error_kind, target_table, value FROM kafka2pg.dead_letters ORDER BY kafka_offset`)
	if err != nil {
		t.Fatal(err)
	}
	type dl struct {
		Offset int64
		Kind   string
		Table  string
		Value  []byte
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[dl])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Offset != 1 || got[0].Kind != decode.KindInvalidJSON || got[1].Offset != 3 ||
		got[1].Kind != decode.KindUnsupported || string(got[1].Value) != `{"nul":"\u0000"}` || got[0].Table != `"public"."orders"` {
		t.Errorf("dead letters = %+v", got)
	}

	// A fenced batch writes no dead letters either.
	claim(t, w, 1)
	bad := batch(1, c.Epoch, 5, 6)
	bad.Records[0].Value = []byte("nope")
	if err := w.Write(ctx, bad); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("write = %v, want ErrFenced", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != 2 {
		t.Errorf("dead letters after a fenced write = %d, want still 2", n)
	}
}

func TestRacingOwnersWriteEveryOffsetOnce(t *testing.T) {
	t.Parallel()
	w, pool := newWriter(t, "g")
	ctx := context.Background()
	const end = 3000
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				c := claim(t, w, 7)
				next := max(c.NextOffset, 0)
				for next < end {
					stop := min(next+97, end)
					if err := w.Write(ctx, batch(7, c.Epoch, next, stop)); err != nil {
						if !errors.Is(err, stream.ErrFenced) {
							t.Error(err)
							return
						}
						break
					}
					next = stop
				}
				if next >= end {
					return
				}
			}
		})
	}
	wg.Wait()
	if n := queryInt(t, pool, `SELECT count(*) FROM orders WHERE kafka_partition = 7`); n != end {
		t.Errorf("rows = %d, want %d", n, end)
	}
	if n := queryInt(t, pool, `SELECT count(DISTINCT kafka_offset) FROM orders WHERE kafka_partition = 7`); n != end {
		t.Errorf("distinct offsets = %d, want %d", n, end)
	}
}

func TestEnsureTablesNamesAMissingColumn(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (kafka_topic text, kafka_partition int, kafka_offset bigint)`); err != nil {
		t.Fatal(err)
	}
	err = writerOn(t, pool, "g").EnsureTables(ctx, true)
	if err == nil || !strings.Contains(err.Error(), `"value"`) || !strings.Contains(err.Error(), "ingest.Sink.Table") {
		t.Fatalf("EnsureTables = %v, want an error naming the missing column and the fix", err)
	}
	if _, err := pool.Exec(ctx, `DROP TABLE orders`); err != nil {
		t.Fatal(err)
	}
	err = writerOn(t, pool, "g").EnsureTables(ctx, false)
	if err == nil || !strings.Contains(err.Error(), "let EnsureTables create it") {
		t.Fatalf("EnsureTables(create=false) on a missing table = %v, want an error saying EnsureTables may create it", err)
	}
	if missing, ok := errors.AsType[*ingest.MissingTableError](err); !ok || missing.Topic != "orders" {
		t.Fatalf("EnsureTables(create=false) on a missing table = %v, want a *ingest.MissingTableError for topic orders", err)
	}
}

func TestRetryableSeparatesServerTroubleFromData(t *testing.T) {
	t.Parallel()
	_, pool := newWriter(t, "g")
	ctx := context.Background()
	_, dataErr := pool.Exec(ctx, `SELECT 1/0`)
	if ingest.Retryable(dataErr) {
		t.Errorf("division by zero (%v) must not be retryable", dataErr)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var pid int32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	_, connErr := conn.Exec(ctx, "SELECT 1")
	if connErr == nil || !ingest.Retryable(connErr) {
		t.Errorf("a terminated connection (%v) must be retryable", connErr)
	}
}

func TestCauseSortsRealPostgresErrors(t *testing.T) {
	t.Parallel()
	_, pool := newWriter(t, "g")
	ctx := t.Context()
	role := fmt.Sprintf("cause_%08x", rand.Uint32())
	if _, err := pool.Exec(ctx, `CREATE ROLE `+role+`; CREATE TABLE cause_locked (n int)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.WithoutCancel(ctx), `DROP TABLE cause_locked; DROP ROLE `+role) })
	fail := func(sql string) error {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, sql)
		if err == nil {
			t.Fatalf("%s succeeded; the case needs it to fail", sql)
		}
		return err
	}
	deadline, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	_, deadlineErr := pool.Exec(deadline, `SELECT pg_sleep(1)`)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a division by zero is data", fail(`SELECT 1/0`), ingest.CauseData},
		{"a missing column is data", fail(`SELECT nope FROM cause_locked`), ingest.CauseData},
		{"a statement timeout is a timeout", fail(`SET LOCAL statement_timeout = 1; SELECT pg_sleep(1)`), ingest.CauseTimeout},
		{"a read-only transaction is read_only", fail(`SET TRANSACTION READ ONLY; INSERT INTO cause_locked VALUES (1)`), ingest.CauseReadOnly},
		{"a missing privilege is refused", fail(`SET LOCAL ROLE ` + role + `; INSERT INTO cause_locked VALUES (1)`), ingest.CauseRefused},
		{"a passed deadline is a timeout", deadlineErr, ingest.CauseTimeout},
		{"a fenced write is fenced", fmt.Errorf("write: %w", &stream.FencedError{}), ingest.CauseFenced},
		{"a refused connection is connection trouble", connectRefused(t), ingest.CauseConnection},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ingest.Cause(tc.err); got != tc.want {
				t.Errorf("Cause(%v) = %q, want %q", tc.err, got, tc.want)
			}
			if got := ingest.Permanent(tc.err); got != (tc.want == ingest.CauseRefused) {
				t.Errorf("Permanent(%v) = %v", tc.err, got)
			}
		})
	}
}

// connectRefused returns the error of a connection to a port nobody
// listens on.
func connectRefused(t *testing.T) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = pgx.Connect(t.Context(), "postgres://x@"+addr+"/x?sslmode=disable&connect_timeout=2")
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	return err
}

// New's errors in the configuration name their field.
func TestNewNamesTheFieldAtFault(t *testing.T) {
	sinks := map[string]ingest.Sink{"orders": {Table: decode.RawTable("public", "orders", decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}
	for field, cfg := range map[string]ingest.Config{
		"ingest.Config.Group":        {Sinks: sinks},
		"ingest.Config.Sinks":        {Group: "g"},
		"ingest.Config.OnError":      {Group: "g", Sinks: sinks, OnError: 9},
		"ingest.Config.WriteTimeout": {Group: "g", Sinks: sinks, WriteTimeout: -time.Second},
	} {
		_, err := ingest.New(nil, cfg)
		if fe, ok := errors.AsType[*stream.FieldError](err); !ok || fe.Field != field {
			t.Errorf("New with a bad %s: %v, want a *stream.FieldError on it", field, err)
		}
	}
}

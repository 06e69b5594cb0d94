package ingest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The transaction helper on its own, with bodies that write one row into a
// table of their own: what it commits, what it rolls back, and what it does
// to its connection.

// onePool returns a pool of a single connection on a fresh migrated
// database, so that "the connection" of a transaction is the pool's only
// one, and the database's URL. tracer, when set, sees every statement.
func onePool(t *testing.T, tracer pgx.QueryTracer) (*pgxpool.Pool, string) {
	t.Helper()
	url, _ := pgtest.MigratedPool(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, url
}

// backendPID is the backend of the pool's idle connection.
func backendPID(t *testing.T, pool *pgxpool.Pool) uint32 {
	t.Helper()
	c, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	return c.Conn().PgConn().PID()
}

// helperWriter is a Writer on a pool of one connection, with a claimed
// partition 0 of topic "t", and a table "scratch" for bodies to write.
func helperWriter(t *testing.T, cfg Config) (*Writer, *pgxpool.Pool, stream.Position) {
	t.Helper()
	pool, _ := onePool(t, nil)
	if _, err := pool.Exec(t.Context(), `CREATE TABLE scratch (n int)`); err != nil {
		t.Fatal(err)
	}
	cfg.Group = "g"
	cfg.Sinks = map[string]Sink{"t": {Table: decode.RawTable("public", "t", decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}
	w, err := New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.EnsureTables(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	pos, err := w.Claim(t.Context(), "t", []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	return w, pool, pos[0]
}

func scalar(t *testing.T, pool *pgxpool.Pool, sql string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestTheTransactionHelperCommitsOrRollsBackWhole(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	insert := func(ctx context.Context, tx *batchTx) error {
		_, err := tx.Exec(ctx, `INSERT INTO scratch VALUES (1)`)
		return err
	}
	for _, tc := range []struct {
		name      string
		staleFrom bool // the batch's epoch is an old one: the fence refuses it
		body      func(ctx context.Context, tx *batchTx) (outcome, error)
		wantErr   func(error) bool
		committed bool // the row, the offsets and the dead letter
	}{
		{"a body that succeeds commits its row, the offsets and its dead letters", false,
			func(ctx context.Context, tx *batchTx) (outcome, error) {
				return outcome{rows: 1, bad: []badRecord{{rec: &stream.Record{Topic: "t", Offset: 1}, kind: "x", err: boom}}}, insert(ctx, tx)
			},
			func(err error) bool { return err == nil }, true},
		{"a body error rolls everything back", false,
			func(ctx context.Context, tx *batchTx) (outcome, error) {
				if err := insert(ctx, tx); err != nil {
					return outcome{}, err
				}
				return outcome{}, boom
			},
			func(err error) bool { return errors.Is(err, boom) }, false},
		{"a statement Postgres refuses rolls everything back", false,
			func(ctx context.Context, tx *batchTx) (outcome, error) {
				if err := insert(ctx, tx); err != nil {
					return outcome{}, err
				}
				_, err := tx.Exec(ctx, `SELECT 1/0`)
				return outcome{}, err
			},
			func(err error) bool { return rowError(err) }, false},
		{"a redo rolls everything back and is no error", false,
			func(ctx context.Context, tx *batchTx) (outcome, error) {
				return outcome{redo: attemptIsolated}, insert(ctx, tx)
			},
			func(err error) bool { return err == nil }, false},
		{"a stop commits what the body wrote and returns the stop", false,
			func(ctx context.Context, tx *batchTx) (outcome, error) {
				return outcome{rows: 1, bad: []badRecord{{rec: &stream.Record{Topic: "t", Offset: 1}, kind: "x", err: boom}},
					stop: &stream.StopError{Topic: "t", Offset: 1, Kind: "x", Err: boom}}, insert(ctx, tx)
			},
			func(err error) bool { var s *stream.StopError; return errors.As(err, &s) && s.Offset == 1 }, true},
		{"a fence rolls back before the body runs", true,
			func(ctx context.Context, tx *batchTx) (outcome, error) {
				t.Error("the body of a fenced transaction ran")
				return outcome{}, insert(ctx, tx)
			},
			func(err error) bool { return errors.Is(err, stream.ErrFenced) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, pool, pos := helperWriter(t, Config{})
			backend := backendPID(t, pool)
			b := &stream.Batch{Topic: "t", Partition: 0, Epoch: pos.Epoch, PrevOffset: -1, FirstOffset: 0, NextOffset: 2,
				Records: []stream.Record{{Topic: "t", Offset: 0}, {Topic: "t", Offset: 1}}}
			if tc.staleFrom {
				b.Epoch--
			}
			sink := w.cfg.Sinks["t"]
			_, err := w.inBatchTx(t.Context(), txSpec{batches: []*stream.Batch{b}, sink: sink}, tc.body)
			if !tc.wantErr(err) {
				t.Fatalf("inBatchTx: %v", err)
			}
			want := map[bool]int64{true: 1, false: 0}[tc.committed]
			if n := scalar(t, pool, `SELECT count(*) FROM scratch`); n != want {
				t.Errorf("%d rows of the body committed, want %d", n, want)
			}
			if n := scalar(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != want {
				t.Errorf("%d dead letters committed, want %d", n, want)
			}
			if n := scalar(t, pool, `SELECT coalesce(next_offset, -1) FROM kafka2pg.offsets`); n != map[bool]int64{true: 2, false: -1}[tc.committed] {
				t.Errorf("next_offset %d after the transaction", n)
			}
			// An ordinary failure rolls back and keeps the connection:
			// only a deadline closes it.
			if again := backendPID(t, pool); again != backend {
				t.Errorf("the transaction ran on backend %d and the pool now has %d: the connection was closed", backend, again)
			}
		})
	}
}

func TestAHelperPastItsDeadlineBetweenStatementsClosesItsConnection(t *testing.T) {
	w, pool, pos := helperWriter(t, Config{WriteTimeout: 200 * time.Millisecond})
	backend := backendPID(t, pool)
	b := &stream.Batch{Topic: "t", Partition: 0, Epoch: pos.Epoch, PrevOffset: -1, FirstOffset: 0, NextOffset: 1, Records: []stream.Record{{Topic: "t"}}}
	var during []WriteInFlight
	_, err := w.inBatchTx(t.Context(), txSpec{batches: []*stream.Batch{b}, sink: w.cfg.Sinks["t"]},
		func(ctx context.Context, tx *batchTx) (outcome, error) {
			during = w.InFlight()
			// Work of the client's own that outlasts the deadline: no
			// statement is in flight when it passes, so pgx has nothing
			// to cancel, and the next statement fails at once.
			<-ctx.Done()
			_, err := tx.Exec(ctx, `INSERT INTO scratch VALUES (1)`)
			return outcome{}, err
		})
	var de *DeadlineError
	if !errors.As(err, &de) || de.Step != StepCopy || de.Topic != "t" {
		t.Fatalf("inBatchTx: %v, want a *DeadlineError at copy", err)
	}
	if len(during) != 1 || during[0].Step != StepCopy || during[0].Partition != 0 {
		t.Errorf("InFlight during the body: %+v, want partition t/0 at copy", during)
	}
	if f := w.InFlight(); len(f) != 0 {
		t.Errorf("InFlight after: %+v", f)
	}
	deadline := time.Now().Add(10 * time.Second)
	for pool.Stat().TotalConns() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the connection of the transaction past its deadline went back to the pool")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if again := backendPID(t, pool); again == backend {
		t.Errorf("the next transaction ran on backend %d, the one past its deadline", backend)
	}
}

func TestTheWriteDeadlineScalesWithTheRows(t *testing.T) {
	cfg := Config{}.withDefaults()
	for _, tc := range []struct {
		rows      int
		isolating bool
		want      time.Duration
	}{
		{1, false, 2 * time.Minute},
		{10000, false, 2 * time.Minute},
		{25000, false, 5 * time.Minute},
		{10000, true, 4 * time.Minute},
		{100000, false, 20 * time.Minute},
	} {
		if got := writeDeadline(cfg, tc.rows, tc.isolating); got != tc.want {
			t.Errorf("deadline of %d rows (isolating %v) = %s, want %s", tc.rows, tc.isolating, got, tc.want)
		}
	}
	if got := (Config{TableWriters: -1}).StatementTimeout(); got != 4*time.Minute {
		t.Errorf("StatementTimeout() = %s, want 4m: an isolating batch's deadline", got)
	}
	if got := (Config{}).StatementTimeout(); got != 20*time.Minute {
		t.Errorf("StatementTimeout() with combined transactions (the default) = %s, want 20m: 100,000 rows'", got)
	}
	if got := (Config{WriteTimeout: time.Second, ClaimLockTimeout: 10 * time.Second, TableWriters: -1}).StatementTimeout(); got != 31*time.Second {
		t.Errorf("StatementTimeout() = %s, want 31s: a claim's three lock waits and its timeout", got)
	}
}

// A FETCH of the Applier's cursor reads FetchBytes of events at their
// mean size so far, within 1 and FetchRows; the first, unmeasured, 256
// at most.
func TestFetchSizeFollowsTheEventsMeanSize(t *testing.T) {
	f := fetchSize{rows: 5000, bytes: 8 << 20}
	if got := f.next(); got != firstFetch {
		t.Fatalf("first FETCH %d, want %d", got, firstFetch)
	}
	for _, c := range []struct {
		size int64
		want int
	}{{4096, 2048}, {100 << 10, 81}, {100, 5000}, {64 << 20, 1}} {
		f := fetchSize{rows: 5000, bytes: 8 << 20, read: 10 * c.size, events: 10}
		if got := f.next(); got != c.want {
			t.Errorf("events of %d bytes: FETCH %d, want %d", c.size, got, c.want)
		}
	}
	if got := (&fetchSize{rows: 7, bytes: 8 << 20}).next(); got != 7 {
		t.Errorf("first FETCH with FetchRows 7: %d, want 7", got)
	}
}

// A chunk's size, which the FETCH sizes follow, is what the Applier holds
// of its events: keys and values, not the schemas split from the values,
// which the cache holds once.
func TestAChunkHoldsItsEventsWithoutTheirSchemas(t *testing.T) {
	schema := bytes.Repeat([]byte("s"), 3000)
	c := chunk{recs: []stream.Record{{Key: []byte("k1"), Value: bytes.Repeat([]byte("v"), 900)}, {Key: []byte("k22"), Value: nil}},
		schemas: [][]byte{schema, nil}}
	if got := c.held(); got != 2+900+3 {
		t.Fatalf("chunk holds %d bytes, want %d: its keys and values, not the 3,000-byte schema the cache holds once", got, 2+900+3)
	}
}

// byteBlocks' copies keep their bytes while later copies fill the same
// block, and none can grow into the next.
func TestByteBlocksCopiesStayPut(t *testing.T) {
	var m byteBlocks
	if m.copy(nil) != nil {
		t.Fatal("a copy of nil (NULL) is not nil")
	}
	if b := m.copy([]byte{}); b == nil || len(b) != 0 {
		t.Fatalf("a copy of an empty value is %#v, not empty", b)
	}
	var srcs, outs [][]byte
	for i, n := range []int{0, 1, 100, byteBlockSize - 50, 200, byteBlockSize + 1, 7, 3 * byteBlockSize, 1} {
		b := bytes.Repeat([]byte{byte('a' + i)}, n)
		srcs, outs = append(srcs, b), append(outs, m.copy(b))
	}
	for i := range srcs {
		if !bytes.Equal(srcs[i], outs[i]) {
			t.Fatalf("copy %d of %d bytes holds %d other bytes", i, len(srcs[i]), len(outs[i]))
		}
		if cap(outs[i]) != len(outs[i]) {
			t.Fatalf("copy %d has room to grow (len %d, cap %d): an append would write over the next", i, len(outs[i]), cap(outs[i]))
		}
	}
	outs[2][0] = 'Z'
	if srcs[2][0] == 'Z' || outs[3][0] != 'd' {
		t.Fatal("a copy shares bytes with its source or its neighbour")
	}
}

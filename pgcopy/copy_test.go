package pgcopy_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// copyTypes is a column of every type the mappings write, fast or not.
const copyTypes = `(t text, v varchar(8), b bytea, jb jsonb, j json, i8 bigint, i4 integer, i2 smallint,
	f8 double precision, f4 real, ok boolean, tz timestamptz, ts timestamp, d date, n numeric, n2 numeric(12,2),
	u uuid, tm time, ip inet, arr bigint[], tarr text[], narr numeric[])`

func copyRows(n int) [][]any {
	rows := make([][]any, n)
	for i := range rows {
		at := time.Date(2026, 11, 30, 9, i%60, i%60, i*1013, time.FixedZone("X", (i%5-2)*3600))
		if i%7 == 0 {
			at = time.Date(1969-i%300, 7, 20, 20, 17, 40, 999_999_999, time.UTC)
		}
		row := []any{
			fmt.Sprintf("text %d ü", i), fmt.Sprint(i % 1000), []byte{byte(i), 0, 255},
			[]byte(fmt.Sprintf(`{"i": %d, "a": [1, "x"]}`, i)), fmt.Sprintf(`{"i":%d}`, i),
			int64(i) * 1_000_003, int32(-i), int16(i % 30000),
			float64(i) / 3, float32(i) / 7, i%2 == 0, at, at, at,
			pgtype.Numeric{Int: big.NewInt(int64(i)*7919 - 5000), Exp: int32(i%9 - 4), Valid: true},
			pgtype.Numeric{Int: big.NewInt(int64(i) * 101), Exp: -2, Valid: true},
			pgtype.UUID{Bytes: [16]byte{byte(i), 1, 2, 3}, Valid: true},
			pgtype.Time{Microseconds: int64(i) * 1_000_001 % 86_400_000_000, Valid: true},
			netip.MustParsePrefix(fmt.Sprintf("10.0.%d.0/24", i%256)),
			[]int64{int64(i), math.MaxInt64}, []string{"a", fmt.Sprint(i)},
			[]pgtype.Numeric{{Int: big.NewInt(int64(i)), Exp: -1, Valid: true}},
		}
		if i%2 == 0 { // the mappers' values, which pgx does not know
			row[14] = pgvalue.Numeric{Int: big.NewInt(int64(i)*7919 - 5000), Exp: int32(i%9 - 4)}
			row[15] = pgvalue.Numeric{Int: big.NewInt(int64(i) * 101), Exp: -2}
			row[16] = pgvalue.UUID{byte(i), 1, 2, 3}
			row[17] = pgvalue.Time{Microseconds: int64(i) * 1_000_001 % 86_400_000_000}
			row[21] = []*pgvalue.Numeric{{Int: big.NewInt(int64(i)), Exp: -1}, nil}
			if i%4 == 0 {
				row[21] = []pgvalue.Numeric{{Int: big.NewInt(int64(i)), Exp: -1}}
			}
		}
		if i%11 == 0 { // every column NULL once in a while
			for c := range row {
				if (i/11+c)%3 == 0 {
					row[c] = nil
				}
			}
		}
		if i == 3 {
			row[8], row[9] = math.Inf(1), float32(math.NaN())
			row[14] = pgtype.Numeric{Int: new(big.Int).Lsh(big.NewInt(3), 90), Exp: -3, Valid: true}
		}
		rows[i] = row
	}
	return rows
}

// TestCopyFromStoresWhatPgxCopyFromStores copies the same rows with pgx and
// with pgcopy.CopyFrom into two tables of every mapped type, and has
// Postgres compare them.
func TestCopyFromStoresWhatPgxCopyFromStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.MigratedPool(t)
	if _, err := pool.Exec(ctx, "CREATE TABLE by_pgx "+copyTypes+"; CREATE TABLE by_us "+copyTypes); err != nil {
		t.Fatal(err)
	}
	cols := []string{"t", "v", "b", "jb", "j", "i8", "i4", "i2", "f8", "f4", "ok", "tz", "ts", "d", "n", "n2", "u", "tm", "ip", "arr", "tarr", "narr"}
	rows := copyRows(20000) // more than one 64 KiB read of pgconn's
	// pgx is handed the pgtype twins of pgvalue's values.
	pgxRows := make([][]any, len(rows))
	for i, row := range rows {
		pgxRows[i] = make([]any, len(row))
		for c, v := range row {
			pgxRows[i][c] = pgcopy.PgxValue(v)
		}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if n, err := tx.CopyFrom(ctx, pgx.Identifier{"by_pgx"}, cols, pgx.CopyFromRows(pgxRows)); err != nil || n != int64(len(rows)) {
		t.Fatalf("pgx: %d rows, %v", n, err)
	}
	if n, err := pgcopy.CopyFrom(ctx, tx, pgx.Identifier{"by_us"}, cols, pgx.CopyFromRows(rows)); err != nil || n != int64(len(rows)) {
		t.Fatalf("pgcopy.CopyFrom: %d rows, %v", n, err)
	}
	// json has no equality: compare it as text, as Postgres stored it.
	sel := "SELECT t, v, b, jb, j::text, i8, i4, i2, f8, f4, ok, tz, ts, d, n, n2, u, tm, ip, arr, tarr, narr FROM "
	var diff, distinct int
	if err := tx.QueryRow(ctx, "SELECT (SELECT count(*) FROM ("+sel+"by_pgx EXCEPT ALL "+sel+"by_us) x) + (SELECT count(*) FROM ("+sel+"by_us EXCEPT ALL "+sel+"by_pgx) y)").Scan(&diff); err != nil {
		t.Fatal(err)
	}
	if diff != 0 {
		t.Fatalf("%d rows differ between pgx's COPY and ours", diff)
	}
	// The comparison has something to compare: the rows are not all alike.
	if err := tx.QueryRow(ctx, "SELECT count(DISTINCT (tz, n, jb)) FROM by_us").Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if distinct < len(rows)/2 {
		t.Fatalf("only %d distinct rows of %d", distinct, len(rows))
	}
}

// TestCopyFromFailsAsPgxDoes: a row Postgres refuses fails the COPY with
// Postgres' error (the isolating path relies on its SQLSTATE), a failing
// source aborts it with the source's error, and a value no type takes is
// refused before anything is sent.
func TestCopyFromFailsAsPgxDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.MigratedPool(t)
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id bigint, code varchar(3))"); err != nil {
		t.Fatal(err)
	}
	cols := []string{"id", "code"}
	try := func(src pgx.CopyFromSource) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		_, err = pgcopy.CopyFrom(ctx, tx, pgx.Identifier{"t"}, cols, src)
		return err
	}
	err := try(pgx.CopyFromRows([][]any{{int64(1), "EUR"}, {int64(2), "EURO"}}))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22001" {
		t.Errorf("a value too long: got %v, want SQLSTATE 22001", err)
	}
	boom := errors.New("the source failed")
	err = try(&failingSource{rows: 3, err: boom})
	if err == nil || !strings.Contains(err.Error(), boom.Error()) {
		t.Errorf("a failing source: got %v, want its error", err)
	}
	err = try(pgx.CopyFromRows([][]any{{struct{}{}, "x"}}))
	if err == nil || !strings.Contains(err.Error(), "struct") {
		t.Errorf("a value of no column type: got %v, want an encode error naming its type", err)
	}
	err = try(pgx.CopyFromRows([][]any{{int64(1)}}))
	if err == nil || !strings.Contains(err.Error(), "expected 2 values, got 1") {
		t.Errorf("a short row: got %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after failed copies the table has %d rows (%v)", n, err)
	}
	// And the connection is still usable, as after pgx's COPY.
	if err := try(pgx.CopyFromRows([][]any{{int64(1), "EUR"}})); err != nil {
		t.Fatal(err)
	}
}

type failingSource struct {
	rows, i int
	err     error
}

func (s *failingSource) Next() bool {
	s.i++
	return s.i <= s.rows
}
func (s *failingSource) Values() ([]any, error) { return []any{int64(s.i), "x"}, nil }
func (s *failingSource) Err() error {
	if s.i > s.rows {
		return s.err
	}
	return nil
}

// TestTheValuesOfChangeSinksLandAsPostgresReadsThem copies pgvalue's
// timetz, interval, bit strings and infinities (package cdc's values, also
// as array elements) into their columns, binds them as a query's
// arguments, and reads each back as Postgres prints it.
func TestTheValuesOfChangeSinksLandAsPostgresReadsThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.MigratedPool(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	pgcopy.RegisterTimeTZ(conn.Conn().TypeMap()) // as every connection of kafka2pg's has it
	cols := "ttz timetz, iv interval, bt bit(4), vb varbit, d date, ts timestamp, tz timestamptz, ttzarr timetz[], ivarr interval[], darr date[]"
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'; SET IntervalStyle = 'postgres'; CREATE TABLE t ("+cols+")"); err != nil {
		t.Fatal(err)
	}
	row := []any{
		pgvalue.TimeTZ{Microseconds: 10*3600e6 + 15*60e6 + 30.5e6, OffsetSeconds: -(5*3600 + 30*60 + 15)},
		pgvalue.Interval{Months: 14, Days: -3, Microseconds: -3723000004},
		pgvalue.Bits{Bytes: []byte{0b0101_0000}, Len: 4},
		pgvalue.Bits{Bytes: []byte{0xff, 0x80}, Len: 9},
		pgvalue.Infinity{}, pgvalue.Infinity{Negative: true}, pgvalue.Infinity{},
		[]any{pgvalue.TimeTZ{OffsetSeconds: 3600}, nil},
		[]any{pgvalue.Interval{Days: 1}},
		[]any{pgvalue.Infinity{Negative: true}, time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)},
	}
	want := []string{"10:15:30.5-05:30:15", "1 year 2 mons -3 days -01:02:03.000004", "0101", "111111111",
		"infinity", "-infinity", "infinity", `{00:00:00+01,NULL}`, `{"1 day"}`, "{-infinity,2024-02-29}"}
	names := []string{"ttz", "iv", "bt", "vb", "d", "ts", "tz", "ttzarr", "ivarr", "darr"}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := pgcopy.CopyFrom(ctx, tx, pgx.Identifier{"t"}, names, pgx.CopyFromRows([][]any{row}))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The same values as a query's arguments, as the change-by-change
	// path binds them.
	params := make([]string, len(names))
	for i := range names {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES ("+strings.Join(params, ", ")+")", pgcopy.PgxValues(row)...); err != nil {
		t.Fatal(err)
	}
	sel := make([]string, len(names))
	for i, n := range names {
		sel[i] = n + "::text"
	}
	rows, err := conn.Query(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM t")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]string, error) {
		out := make([]string, len(names))
		ptrs := make([]any, len(names))
		for i := range out {
			ptrs[i] = &out[i]
		}
		return out, r.Scan(ptrs...)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d rows, want 2", len(got))
	}
	for i, r := range got {
		for c := range names {
			if r[c] != want[c] {
				t.Errorf("row %d (%s), %s: Postgres reads %q, want %q", i, []string{"COPY", "arguments"}[i], names[c], r[c], want[c])
			}
		}
	}
}

package pgcopy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/stream"
)

// TestNumericCodecCopiesIntoPostgresExactly: rows COPYed with NumericCodec
// read back as the same text as rows COPYed with pgtype's codec, in
// unconstrained, scaled and array columns.
func TestNumericCodecCopiesIntoPostgresExactly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	url := pgtest.URL(t)
	stock, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer stock.Close(context.WithoutCancel(ctx))
	fast, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close(context.WithoutCancel(ctx))
	fast.TypeMap().RegisterType(&pgtype.Type{Name: "numeric", OID: pgtype.NumericOID, Codec: pgcopy.NumericCodec{}})

	table := fmt.Sprintf("numeric_codec_%d", rand.Uint32())
	if _, err := stock.Exec(ctx, "CREATE TABLE "+table+" (src text, i int, n numeric, n2 numeric(12,2), n0 numeric(20,0), a numeric(6,3)[])"); err != nil {
		t.Fatal(err)
	}
	defer stock.Exec(context.WithoutCancel(ctx), "DROP TABLE "+table)

	m, err := decode.NewJSONMapper(decode.MappingSpec{Table: "t", Columns: []decode.ColumnSpec{
		{Name: "n", Type: "numeric"}, {Name: "n2", Type: "numeric(12,2)"}, {Name: "n0", Type: "numeric(20,0)"}, {Name: "a", Type: "numeric(6,3)[]"}}})
	if err != nil {
		t.Fatal(err)
	}
	values := []string{
		`{"n":0,"n2":0,"n0":0,"a":[]}`,
		`{"n":-1.005,"n2":-1.005,"n0":-0.5,"a":[1.0005,null,-999.999]}`,
		`{"n":12345678901234567890.123,"n2":1234567890.125,"n0":18446744073709551615,"a":[0.001]}`,
		`{"n":1e-30,"n2":"0.004","n0":1.2e19,"a":[12.5]}`,
		`{"n":1.2e23,"n2":9999999999.99,"n0":99999999999999999999,"a":[0]}`,
		`{"n":"-0.0000000000000000001","n2":0.1,"n0":"7","a":[100]}`,
		`{"n":123456789012345678901234567890,"n2":-0.01,"n0":-12345678901234567,"a":[-0.5]}`,
	}
	var rows [][]any
	for i, v := range values {
		row, err := m.Row(&stream.Record{Value: []byte(v)}, nil)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		rows = append(rows, append([]any{"", int32(i)}, row...))
	}
	cols := []string{"src", "i", "n", "n2", "n0", "a"}
	for src, conn := range map[string]*pgx.Conn{"stock": stock, "fast": fast} {
		for _, r := range rows {
			r[0] = src
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows)); err != nil {
			t.Fatalf("copy with the %s codec: %v", src, err)
		}
	}
	q := `SELECT s.i, s.n::text, f.n::text, s.n2::text, f.n2::text, s.n0::text, f.n0::text, s.a::text, f.a::text,
		scale(s.n), scale(f.n)
		FROM ` + table + ` s JOIN ` + table + ` f ON s.i = f.i AND s.src = 'stock' AND f.src = 'fast' ORDER BY s.i`
	got, err := stock.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var i, stockScale, fastScale int
	var s [8]string
	_, err = pgx.ForEachRow(got, []any{&i, &s[0], &s[1], &s[2], &s[3], &s[4], &s[5], &s[6], &s[7], &stockScale, &fastScale}, func() error {
		n++
		for j := 0; j < 8; j += 2 {
			if s[j] != s[j+1] {
				t.Errorf("%s: column %s is %s with pgtype's codec, %s with NumericCodec", values[i], cols[2+j/2], s[j], s[j+1])
			}
		}
		if stockScale != fastScale {
			t.Errorf("%s: scale %d with pgtype's codec, %d with NumericCodec", values[i], stockScale, fastScale)
		}
		return nil
	})
	if err != nil || n != len(values) {
		t.Fatalf("%s: %d rows, %v", q, n, err)
	}
}

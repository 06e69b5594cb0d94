package cdc

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// pgConn is a connection to the test's Postgres with the codecs the
// writer registers on its connections, closed when the test ends.
func pgConn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn := pgtest.Conn(t)
	pgcopy.RegisterTimeTZ(conn.TypeMap())
	pgcopy.RegisterNumericCodec(conn.TypeMap())
	return conn
}

// copyRows writes rows into table with pgcopy.CopyFrom, as the writer
// does, in a transaction of its own.
func copyRows(ctx context.Context, conn *pgx.Conn, table pgx.Identifier, cols []string, rows [][]any) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := pgcopy.CopyFrom(ctx, tx, table, cols, pgx.CopyFromRows(rows))
		return err
	})
}

// TestEveryTypeLandsExactlyInPostgres decodes the all-types fixture,
// creates its table from the planned DDL, writes the row with binary COPY
// (as the writer does) and reads each column back as Postgres prints it.
func TestEveryTypeLandsExactlyInPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := pgConn(t)

	d := mustDecoder(t, Config{Table: "all_types"})
	var ch stream.Change
	rec := fixture(t, "pg_all_types_create.json")
	if err := d.Decode(&rec, &ch); !errors.Is(err, decode.ErrTableChanged) {
		t.Fatalf("first decode: %v", err)
	}
	if err := d.Decode(&rec, &ch); err != nil {
		t.Fatal(err)
	}
	tab := d.Table()
	for _, stmt := range schema.PlanCreate(tab) {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := copyRows(ctx, conn, tab.Ident(), tab.ColumnNames(), [][]any{ch.Row}); err != nil {
		t.Fatalf("copy: %v", err)
	}
	want := map[string]string{
		"id": "1", "i8": "-128", "i16": "-32768", "i64": "-9223372036854775808",
		"f32": "NaN", "f64": "-Infinity", "b": "true",
		"txt":   "h\u00e9llo \"q\" \\ \U0001F600",
		"bin":   `\x00ff10`,
		"dec":   "-12345.67",
		"money": "0.99",
		"vsd":   "-0.001",
		"d":     "2024-02-29", "d_old": "0001-01-01 BC", "d_inf": "",
		"t": "23:59:59.999", "mt": "24:00:00", "nt": "00:00:00.000001",
		"ts": "1969-12-31 23:59:59.999", "mts": "infinity", "mts_inf": "-infinity", "nts": "1969-12-31 23:59:59.999999",
		"zts": "2018-06-20 11:13:16.945104+00", "zts_inf": "infinity", "ztime": "13:13:16.9451+00",
		"cdate": "1969-12-31", "ctime": "00:00:00", "cts": "2018-06-20 15:13:16.945",
		"md": "730:30:00", "iv": "10 mons 3 days 04:04:53.22",
		"js": `{"a": [1, 2.50], "b": null}`,
		"u":  "0e2c74a1-9b3d-4c5e-8f00-123456789abc",
		"e":  "green", "es": "{a,c}", "bits": "1000000101", "x": "<a>1</a>",
		"g":    `\x0101000020e6100000000000000000f83f00000000000002c0`,
		"p":    `\x0101000000000000000000f83f00000000000002c0`,
		"yr":   "2024",
		"arr":  "{1,NULL,3}",
		"tarr": `{x,NULL,"y,z"}`,
		"m":    `{"k1": 1, "k2": null}`,
		"st":   `{"a": 7, "amount": -0.005}`,
		"opt":  "",
	}
	wantTypes := map[string]string{
		"i8": "smallint", "dec": "numeric(10,2)", "money": "numeric", "vsd": "numeric", "ts": "timestamp without time zone",
		"zts": "timestamp with time zone", "ztime": "time with time zone", "md": "interval", "bits": "bit varying(10)",
		"x": "xml", "g": "bytea", "arr": "integer[]", "tarr": "text[]", "m": "jsonb", "st": "jsonb", "es": "text[]", "u": "uuid", "js": "jsonb",
	}
	rows, err := conn.Query(ctx, schema.ExistingColumnsSQL, tab.QualifiedName())
	if err != nil {
		t.Fatal(err)
	}
	existing, err := pgx.CollectRows(rows, pgx.RowToStructByPos[schema.ExistingColumn])
	if err != nil {
		t.Fatal(err)
	}
	if plan, err := schema.PlanEvolve(tab, existing); err != nil || len(plan) != 0 {
		t.Errorf("evolving the table to itself plans %q, %v", plan, err)
	}
	for i, c := range tab.Columns {
		if w, ok := wantTypes[c.Name]; ok && c.Type != w {
			t.Errorf("column %s has type %s, want %s", c.Name, c.Type, w)
		}
		if existing[i].Type != c.Type {
			t.Errorf("column %s: planned %s, Postgres says %s", c.Name, c.Type, existing[i].Type)
		}
		var got *string
		q := "SELECT " + pgx.Identifier{c.Name}.Sanitize() + "::text FROM " + tab.QualifiedName()
		if err := conn.QueryRow(ctx, q).Scan(&got); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		s := ""
		if got != nil {
			s = *got
		}
		if w, ok := want[c.Name]; !ok {
			t.Errorf("column %s: no expectation (got %q)", c.Name, s)
		} else if s != w {
			t.Errorf("column %s (%s): %q, want %q", c.Name, c.Type, s, w)
		}
	}
}

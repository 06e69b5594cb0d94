package decode

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// TestJSONMapperRowsCopyIntoPostgresExactly builds one row of every type,
// COPYs it in binary into a table created from PlanCreate, and reads each
// value back as text: the Go values the mapper returns must be ones pgx
// encodes, and exactly.
func TestJSONMapperRowsCopyIntoPostgresExactly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn := pgtest.Conn(t)
	if _, err := conn.Exec(ctx, "SET TIME ZONE 'UTC'"); err != nil {
		t.Fatal(err)
	}

	cols := []struct {
		spec ColumnSpec
		want string // the value read back with ::text
	}{
		{ColumnSpec{Name: "t", Type: "text"}, "héllo wörld"},
		{ColumnSpec{Name: "vc", Type: "varchar(5)"}, "ünïcö"},
		{ColumnSpec{Name: "i2", Type: "smallint"}, "-32768"},
		{ColumnSpec{Name: "i4", Type: "integer"}, "2147483647"},
		{ColumnSpec{Name: "i8", Type: "bigint"}, "-9223372036854775808"},
		{ColumnSpec{Name: "i8s", Type: "bigint"}, "9223372036854775807"},
		{ColumnSpec{Name: "n", Type: "numeric(38,10)"}, "1234567890123456789012345678.0123456789"},
		{ColumnSpec{Name: "nr", Type: "numeric(6,2)"}, "-1234.57"},
		{ColumnSpec{Name: "nu", Type: "numeric"}, "0.000000000000000000000000000001"},
		{ColumnSpec{Name: "ne", Type: "numeric"}, "120000000000000000000000"},
		{ColumnSpec{Name: "r", Type: "real"}, "1.5"},
		{ColumnSpec{Name: "d", Type: "double precision"}, "0.1"},
		{ColumnSpec{Name: "b", Type: "boolean"}, "true"},
		{ColumnSpec{Name: "tz", Type: "timestamptz"}, "2026-03-01 01:02:03.123457+00"},
		{ColumnSpec{Name: "tzms", Type: "timestamptz", TimeUnit: "ms"}, "2023-11-14 22:13:20.123+00"},
		{ColumnSpec{Name: "tzns", Type: "timestamptz", TimeUnit: "ns"}, "2023-11-14 22:13:20.123457+00"},
		{ColumnSpec{Name: "ts", Type: "timestamp"}, "2026-03-01 03:02:03"},
		{ColumnSpec{Name: "tsz", Type: "timestamp"}, "2026-03-01 01:02:03"},
		{ColumnSpec{Name: "tsold", Type: "timestamptz"}, "0001-01-01 00:00:00+00"},
		{ColumnSpec{Name: "dt", Type: "date"}, "1999-12-31"},
		{ColumnSpec{Name: "dts", Type: "date", TimeUnit: "s"}, "2023-11-14"},
		{ColumnSpec{Name: "tm", Type: "time"}, "23:59:59.999999"},
		{ColumnSpec{Name: "tm24", Type: "time"}, "24:00:00"},
		{ColumnSpec{Name: "tmms", Type: "time", TimeUnit: "ms"}, "01:00:00.5"},
		{ColumnSpec{Name: "u", Type: "uuid"}, "123e4567-e89b-12d3-a456-426614174000"},
		{ColumnSpec{Name: "j", Type: "jsonb"}, `{"a": [1, 2.50, "x"], "n": 12345678901234567890123}`},
		{ColumnSpec{Name: "whole", Path: "$", Type: "jsonb"}, ""}, // checked separately
		{ColumnSpec{Name: "by", Type: "bytea"}, `\x00ff10`},
		{ColumnSpec{Name: "ip4", Type: "inet"}, "192.0.2.1/32"}, // ::text shows the mask, as for the literal
		{ColumnSpec{Name: "ip6", Type: "inet"}, "2001:db8::1/64"},
		{ColumnSpec{Name: "ai", Type: "integer[]"}, "{1,NULL,3}"},
		{ColumnSpec{Name: "at", Type: "text[]"}, `{a,"b c"}`},
		{ColumnSpec{Name: "an", Type: "numeric(5,2)[]"}, "{1.00,2.35}"},
		{ColumnSpec{Name: "au", Type: "uuid[]"}, "{123e4567-e89b-12d3-a456-426614174000,NULL}"},
		{ColumnSpec{Name: "ats", Type: "timestamptz[]"}, `{"2026-01-01 00:00:00+00"}`},
		{ColumnSpec{Name: "aip", Type: "inet[]"}, "{10.0.0.1/8}"},
		{ColumnSpec{Name: "ab", Type: "boolean[]"}, "{t,f}"},
		{ColumnSpec{Name: "abt", Type: "bytea[]"}, `{"\\x01"}`},
		{ColumnSpec{Name: "af", Type: "double precision[]"}, "{1.5,NULL}"},
		{ColumnSpec{Name: "ad", Type: "date[]"}, "{2026-02-28}"},
		{ColumnSpec{Name: "atm", Type: "time[]"}, "{12:00:00}"},
		{ColumnSpec{Name: "missing", Type: "bigint"}, ""},
		{ColumnSpec{Name: "kid", From: "key", Path: "id", Type: "bigint"}, "77"},
	}
	value := `{"t":"héllo wörld","vc":"ünïcö","i2":-32768,"i4":2147483647,"i8":-9223372036854775808,"i8s":"9223372036854775807",
		"n":1234567890123456789012345678.0123456789,"nr":-1234.565,"nu":1e-30,"ne":1.2e23,"r":1.5,"d":0.1,"b":true,
		"tz":"2026-03-01T03:02:03.1234565+02:00","tzms":1700000000123,"tzns":1700000000123456789,
		"ts":"2026-03-01T03:02:03","tsz":"2026-03-01T03:02:03+02:00","tsold":"0001-01-01T00:00:00Z",
		"dt":"1999-12-31","dts":1700000000,"tm":"23:59:59.999999","tm24":"24:00:00","tmms":3600500,
		"u":"123E4567-E89B-12D3-A456-426614174000","j":{"a":[1,2.50,"x"],"n":12345678901234567890123},
		"by":"AP8Q","ip4":"192.0.2.1","ip6":"2001:db8::1/64","ai":[1,null,3],"at":["a","b c"],"an":[1,2.345],
		"au":["123e4567e89b12d3a456426614174000",null],"ats":["2026-01-01T00:00:00Z"],"aip":["10.0.0.1/8"],
		"ab":[true,false],"abt":["AQ=="],"af":[1.5,null],"ad":["2026-02-28"],"atm":["12:00"]}`
	spec := MappingSpec{Schema: "typed", Table: "every type", Key: []string{"kafka_offset"},
		Metadata: MetadataSpec{Topic: "kafka_topic", Partition: "kafka_partition", Offset: "kafka_offset", Timestamp: "kafka_ts",
			TimestampType: "kafka_ts_type", Key: "kafka_key", KeyFormat: "json", Headers: "kafka_headers", Header: map[string]string{"trace": "trace-id"}}}
	for _, c := range cols {
		spec.Columns = append(spec.Columns, c.spec)
	}
	m, err := NewJSONMapper(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range schema.PlanCreate(m.Table()) {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	ts := time.Date(2026, 5, 6, 7, 8, 9, 10000, time.UTC)
	r := &stream.Record{Topic: "orders", Partition: 2, Offset: 99, Timestamp: ts, TimestampType: stream.TimestampLogAppendTime,
		Key: []byte(`{"id": 77}`), Value: []byte(value), Headers: []stream.Header{{Key: "trace-id", Value: []byte("abc")}}}
	row, err := m.Row(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl := m.Table()
	n, err := conn.CopyFrom(ctx, tbl.Ident(), tbl.ColumnNames(), pgx.CopyFromRows([][]any{row}))
	if err != nil || n != 1 {
		t.Fatalf("copy %v: n=%d err=%v", row, n, err)
	}

	readText := func(col string) (string, bool) {
		t.Helper()
		var s *string
		q := "SELECT " + pgx.Identifier{col}.Sanitize() + "::text FROM " + tbl.QualifiedName()
		if err := conn.QueryRow(ctx, q).Scan(&s); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if s == nil {
			return "", false
		}
		return *s, true
	}
	for _, c := range cols {
		if c.spec.Name == "whole" {
			continue
		}
		got, ok := readText(c.spec.Name)
		if c.want == "" {
			if ok {
				t.Errorf("column %s = %q, want NULL", c.spec.Name, got)
			}
			continue
		}
		if got != c.want {
			t.Errorf("column %s (%s) = %q, want %q", c.spec.Name, c.spec.Type, got, c.want)
		}
	}
	var wholeOK bool
	if err := conn.QueryRow(ctx, `SELECT whole = $1::jsonb FROM `+tbl.QualifiedName(), value).Scan(&wholeOK); err != nil || !wholeOK {
		t.Errorf("the whole document did not round-trip: ok=%v err=%v", wholeOK, err)
	}
	meta := map[string]string{"kafka_topic": "orders", "kafka_partition": "2", "kafka_offset": "99",
		"kafka_ts": "2026-05-06 07:08:09.00001+00", "kafka_ts_type": "LogAppendTime", "kafka_key": `{"id": 77}`,
		"kafka_headers": `[{"key": "trace-id", "value": "abc"}]`, "trace": "abc"}
	for col, want := range meta {
		if got, _ := readText(col); got != want {
			t.Errorf("metadata column %s = %q, want %q", col, got, want)
		}
	}

	// The catalog's view of the created table needs no change.
	rows, err := conn.Query(ctx, schema.ExistingColumnsSQL, tbl.QualifiedName())
	if err != nil {
		t.Fatal(err)
	}
	have, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (schema.ExistingColumn, error) {
		var c schema.ExistingColumn
		err := row.Scan(&c.Name, &c.Type, &c.NotNull, &c.Filled, &c.Generated)
		return c, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(have) != len(tbl.Columns) {
		t.Fatalf("catalog has %d columns, table %d", len(have), len(tbl.Columns))
	}
	plan, err := schema.PlanEvolve(tbl, have)
	if err != nil || len(plan) != 0 {
		t.Errorf("PlanEvolve of the table just created = %q, %v; want nothing to do", plan, err)
	}
}

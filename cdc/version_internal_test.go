package cdc

import (
	"slices"
	"testing"

	"github.com/kafka2pg/kafka2pg/pgvalue"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The version of a change grows with the source's position: Postgres'
// sequence orders by the last commit LSN first, then the LSN, where the
// LSN alone would not; a snapshot read is below every streamed change.
func TestThePositionVersionOrdersChangesOfARow(t *testing.T) {
	t.Parallel()
	ordered := []struct {
		name string
		env  envelope
	}{
		{"a snapshot read", envelope{op: 'r', source: sourceBlock{LSN: 9000}}},
		{"a change of a transaction with a high LSN that commits first", envelope{op: 'u', source: sourceBlock{Sequence: `["100","500"]`, LSN: 500}}},
		{"a change with a lower LSN of a transaction that commits after it", envelope{op: 'u', source: sourceBlock{Sequence: `["600","300"]`, LSN: 300}}},
		{"the next change of that transaction", envelope{op: 'd', source: sourceBlock{Sequence: `["600","310"]`, LSN: 310}}},
	}
	var prev *pgvalue.Numeric
	for _, c := range ordered {
		v, ok := positionVersion(&c.env)
		if !ok {
			t.Fatalf("%s: no version", c.name)
		}
		n := v.(pgvalue.Numeric)
		if prev != nil && n.Int.Cmp(prev.Int) <= 0 {
			t.Errorf("%s: version %s is not above the one before, %s", c.name, n.Int, prev.Int)
		}
		prev = &n
	}
	// The first transaction the connector streams has no last commit.
	first := envelope{op: 'c', source: sourceBlock{Sequence: `[null,"700"]`}}
	if v, ok := positionVersion(&first); !ok || v.(pgvalue.Numeric).Int.Int64() != 700 {
		t.Errorf("[null,\"700\"]: %v, %v: want 700", v, ok)
	}

	mysql := []envelope{
		{op: 'c', source: sourceBlock{File: "mysql-bin.000009", Pos: 4000, Row: 3}},
		{op: 'u', source: sourceBlock{File: "mysql-bin.000010", Pos: 4, Row: 0}},
		{op: 'u', source: sourceBlock{File: "mysql-bin.000010", Pos: 4, Row: 1}},
		{op: 'd', source: sourceBlock{File: "mysql-bin.000010", Pos: 900, Row: 0}},
	}
	prev = nil
	for i, env := range mysql {
		v, ok := positionVersion(&env)
		if !ok {
			t.Fatalf("mysql %d: no version", i)
		}
		n := v.(pgvalue.Numeric)
		if prev != nil && n.Int.Cmp(prev.Int) <= 0 {
			t.Errorf("mysql %d (%s:%d row %d): version %s is not above the one before, %s", i, env.source.File, env.source.Pos, env.source.Row, n.Int, prev.Int)
		}
		prev = &n
	}
	if v, ok := positionVersion(&envelope{op: 'u', source: sourceBlock{Connector: "sqlserver"}}); ok {
		t.Errorf("a source without a position: version %v, want none", v)
	}
	if v, ok := positionVersion(&envelope{op: 'u', source: sourceBlock{Sequence: `not json`}}); ok {
		t.Errorf("a sequence that is not JSON: version %v, want none", v)
	}
}

// In the events a real Debezium PostgreSQL connector recorded, each row's
// changes have growing versions in offset order, snapshot reads 0, and
// the version column of each upserted row holds its change's version.
func TestRecordedEventsHaveGrowingVersionsPerRow(t *testing.T) {
	t.Parallel()
	for _, c := range recordedConnectors(t) {
		for _, table := range recordedTables {
			t.Run(c.Name+"/"+table, func(t *testing.T) {
				t.Parallel()
				cfg := Config{Schema: "rec_" + c.Name, Table: table, Version: "src_version", Deleted: "deleted_at"}
				if c.Config["value.converter.schemas.enable"] == "false" {
					cfg.Columns = columnsOfRecording(t, table)
					cfg.Key = primaryKeys[table]
				}
				d := mustDecoder(t, cfg)
				last := map[string]*pgvalue.Numeric{}
				streamed := 0
				for _, rec := range recordedEvents(t, c.Name, table) {
					ch, err := decodeGrowing(t, d, rec)
					if err != nil || ch.Op == stream.OpNone || ch.Op == stream.OpTruncate {
						continue // the bad records TestEveryRecordedEventDecodes checks
					}
					v, ok := ch.Version.(pgvalue.Numeric)
					if !ok {
						t.Fatalf("offset %d: version %#v", rec.Offset, ch.Version)
					}
					if ch.Op == stream.OpUpsert {
						cols := d.Table().ColumnNames()
						row := ch.Row[slices.Index(cols, "src_version")].(pgvalue.Numeric)
						if row.Int.Cmp(v.Int) != 0 || ch.Row[slices.Index(cols, "deleted_at")] != nil {
							t.Fatalf("offset %d: the row's version %s and deleted_at %v, want %s and NULL", rec.Offset, row.Int, ch.Row[slices.Index(cols, "deleted_at")], v.Int)
						}
					}
					key := recordedKey(rec, table)
					if ch.Event == 'r' {
						if v.Int.Sign() != 0 {
							t.Fatalf("offset %d: a snapshot read of version %s, want 0", rec.Offset, v.Int)
						}
					} else if prev := last[key]; prev != nil && v.Int.Cmp(prev.Int) <= 0 {
						t.Fatalf("offset %d (key %s, op %c): version %s, not above the row's previous %s", rec.Offset, key, ch.Event, v.Int, prev.Int)
					} else {
						streamed++
					}
					last[key] = &v
				}
				if streamed == 0 {
					t.Fatal("no streamed change: the recording has none to order")
				}
			})
		}
	}
}

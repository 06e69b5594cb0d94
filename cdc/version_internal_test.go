package cdc

import (
	"testing"

	"github.com/kafka2pg/kafka2pg/pgvalue"
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

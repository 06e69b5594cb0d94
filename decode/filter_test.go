package decode_test

import (
	"errors"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// What a filter keeps, drops, lets through and cannot evaluate.
func TestFilterKeep(t *testing.T) {
	debezium := decode.FilterSpec{Where: `value.after.type == "order"`, Envelope: true, PassTombstones: true, PassDeletes: true}
	byKey := decode.FilterSpec{Where: `key == "a" && headers.tenant == "t1"`}
	for _, c := range []struct {
		name  string
		spec  decode.FilterSpec
		value string // "": a tombstone
		keep  bool
		bad   bool
	}{
		{"a debezium create that matches", debezium, `{"op":"c","after":{"type":"order"}}`, true, false},
		{"a debezium update that does not", debezium, `{"op":"u","after":{"type":"view"}}`, false, false},
		{"a debezium delete, whose after is null", debezium, `{"op":"d","before":{"type":"view"},"after":null}`, true, false},
		{"a debezium delete with its Connect schema", debezium, `{"schema":{},"payload":{"op":"d","after":null}}`, true, false},
		{"a debezium update with its Connect schema", debezium, `{"schema":{},"payload":{"op":"u","after":{"type":"order"}}}`, true, false},
		{"a debezium tombstone", debezium, "", true, false},
		{"a value that is not JSON", debezium, `{"op":`, false, true},
		{"a field of null", decode.FilterSpec{Where: `value.a.b == 1`}, `{"a":null}`, false, true},
		{"a tombstone of an append sink", decode.FilterSpec{Where: `value == nil`}, "", true, false},
		{"the key and a header", byKey, `1`, true, false},
		{"a value that makes the expression no boolean", decode.FilterSpec{Where: `value.a`}, `{"a":1}`, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := decode.CompileFilter(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			r := &stream.Record{Topic: "t", Offset: 7, Key: []byte("a"), Headers: []stream.Header{{Key: "tenant", Value: []byte("t0")}, {Key: "tenant", Value: []byte("t1")}}}
			if c.value != "" {
				r.Value = []byte(c.value)
			}
			keep, err := f.Keep(r)
			var de *decode.DecodeError
			if c.bad != (err != nil) || (err != nil && (!errors.As(err, &de) || de.Kind != decode.KindFilter || !errors.Is(err, decode.ErrBadRecord))) {
				t.Fatalf("Keep(%s) error = %v, want a bad record of kind filter: %v", c.value, err, c.bad)
			}
			if keep != c.keep {
				t.Errorf("Keep(%s) = %v, want %v", c.value, keep, c.keep)
			}
		})
	}
}

// An expression that does not compile, or is not boolean, names its
// position.
func TestCompileFilterNamesThePosition(t *testing.T) {
	for _, c := range []struct {
		where        string
		line, column int
	}{
		{`valu.type == "order"`, 1, 1},
		{"value.a == 1 &&\n  value.b ==", 2, 12},
		{`1 + 1`, 1, 1},
	} {
		_, err := decode.CompileFilter(decode.FilterSpec{Where: c.where})
		var ee *decode.ExprError
		if !errors.As(err, &ee) || ee.Line != c.line || ee.Column != c.column || ee.Expr != c.where {
			t.Errorf("CompileFilter(%q) = %v (%+v), want an ExprError at %d:%d", c.where, err, ee, c.line, c.column)
		}
	}
}

// One compiled filter on a small JSON value: the decode of the value and
// the evaluation.
func BenchmarkFilterKeep(b *testing.B) {
	f, err := decode.CompileFilter(decode.FilterSpec{Where: `value.type == "order"`})
	if err != nil {
		b.Fatal(err)
	}
	r := &stream.Record{Key: []byte("k"), Value: []byte(`{"id":12345,"type":"order","total":99.5,"ok":true}`)}
	b.ReportAllocs()
	for b.Loop() {
		if keep, err := f.Keep(r); !keep || err != nil {
			b.Fatal(keep, err)
		}
	}
}

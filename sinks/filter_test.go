package sinks_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/stream"
)

// A where that does not compile stops Validate and Build with the field,
// the line of the where key and the position in the expression.
func TestAnInvalidWhereIsRefusedWithItsPosition(t *testing.T) {
	cfg := load(t, `sinks:
  - topic: a
  - topic: orders
    mode: upsert
    key: [id]
    columns: [{name: id, type: bigint}]
    where: value.type == "order" &&& key != nil
`)
	for name, err := range map[string]error{"Validate": cfg.Validate(), "Build": func() error { _, err := cfg.Build(t.Context(), nil); return err }()} {
		var fe *stream.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("%s: %v, want a *stream.FieldError", name, err)
		}
		msg := fe.Error()
		if fe.Field != "sinks[1].where" || fe.Line != 7 || !strings.Contains(msg, `value.type == "order" &&& key != nil`) || !strings.Contains(msg, "line 1, column 25") {
			t.Errorf("%s: field %q line %d: %s; want sinks[1].where at line 7, the expression and line 1, column 25 (the third &)", name, fe.Field, fe.Line, msg)
		}
	}
}

// A where reads the value as JSON: a sink whose values are not is refused,
// and one whose values are gets its filter.
func TestWhereNeedsJSONValues(t *testing.T) {
	err := load(t, `sinks:
  - topic: logs
    format: text
    where: key == "a"
`).Validate()
	var fe *stream.FieldError
	if !errors.As(err, &fe) || fe.Field != "sinks[0].where" || !strings.Contains(fe.Error(), "format text") {
		t.Fatalf("a where on format text: %v, want a FieldError on sinks[0].where naming the format", err)
	}
	set := build(t, `sinks:
  - topic: events
    where: value.type == "order"
  - topic: shop.public.orders
    format: debezium
    where: value.after.type == "order"
  - topic: plain
`)
	for topic, want := range map[string]bool{"events": true, "shop.public.orders": true, "plain": false} {
		if got := set.Fixed[topic].Filter != nil; got != want {
			t.Errorf("the sink of %s has a filter: %v, want %v", topic, got, want)
		}
	}
}

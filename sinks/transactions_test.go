package sinks_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/sinks"
)

func TestTransactionsSinkGetsItsTransactionTopicAndApplier(t *testing.T) {
	t.Parallel()
	cfg := load(t, `sinks:
  - topic_regex: 'bank\.public\..*'
    format: debezium
    transactions: true
  - topic: other.public.orders
    format: debezium
    transactions: true
    transaction_topic: other.tx
    on_incomplete: apply
    incomplete_timeout: 90s
    retain_ends: 5000
    orphan_after: 20m
`)
	set, err := cfg.Build(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"bank.transaction", "other.tx"} {
		if s, ok := set.Fixed[topic]; !ok || s.Boundaries == nil || s.Boundaries.Source != topic {
			t.Errorf("transaction topic %s: sink %+v, want a Boundaries sink of source %s", topic, s, topic)
		}
	}
	if s := set.Fixed["other.public.orders"]; s.Transactions == nil || s.Transactions.Source != "other.tx" {
		t.Errorf("other.public.orders: Transactions %+v, want source other.tx", s.Transactions)
	}
	if s, ok, err := set.Resolve(t.Context(), "bank.public.accounts"); err != nil || !ok || s.Transactions == nil || s.Transactions.Source != "bank.transaction" {
		t.Errorf("bank.public.accounts: Transactions %+v (%v, %v), want source bank.transaction", s.Transactions, ok, err)
	}
	want := []ingest.ApplierConfig{{Source: "bank.transaction"},
		{Source: "other.tx", OnIncomplete: ingest.IncompleteApply, IncompleteTimeout: 90 * time.Second, RetainEnds: 5000, OrphanAfter: 20 * time.Minute}}
	if !slices.Equal(set.Appliers, want) {
		t.Errorf("appliers %+v, want %+v", set.Appliers, want)
	}
	topics, regex := cfg.Topics()
	if !regex || !slices.Contains(topics, `^bank\.transaction$`) || !slices.Contains(topics, `^other\.tx$`) {
		t.Errorf("subscription %q (regex %v), want the transaction topics in it", topics, regex)
	}
}

func TestTransactionsMisuseIsAFieldErrorNamingTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sink, field, says string
	}{
		{"on a json sink", "topic: t\n    transactions: true", "sinks[0].transactions", "needs format debezium"},
		{"on a connect_json sink", "topic: a.b.c\n    format: connect_json\n    transactions: true", "sinks[0].transactions", "needs format debezium"},
		{"with a prefix that cannot be read", "topic_regex: '.*'\n    format: debezium\n    transactions: true", "sinks[0].transaction_topic", "name the transaction topic"},
		{"transaction_topic without transactions", "topic: a.b.c\n    format: debezium\n    transaction_topic: a.transaction", "sinks[0].transaction_topic", "is for transactions: true"},
		{"an unknown on_incomplete", "topic: a.b.c\n    format: debezium\n    transactions: true\n    on_incomplete: drop", "sinks[0].on_incomplete", "is not wait or apply"},
		{"a timeout with wait", "topic: a.b.c\n    format: debezium\n    transactions: true\n    incomplete_timeout: 1m", "sinks[0].incomplete_timeout", "on_incomplete: apply"},
		{"retain_ends without transactions", "topic: a.b.c\n    format: debezium\n    retain_ends: 10", "sinks[0].retain_ends", "is for transactions: true"},
		{"a negative retain_ends", "topic: a.b.c\n    format: debezium\n    transactions: true\n    retain_ends: -1", "sinks[0].retain_ends", "is negative"},
		{"an orphan_after that is no duration", "topic: a.b.c\n    format: debezium\n    transactions: true\n    orphan_after: soon", "sinks[0].orphan_after", "positive duration"},
		{"avro values", "topic: a.b.c\n    format: debezium\n    value_format: avro\n    transactions: true", "sinks[0].transactions", "JsonConverter"},
		{"with children", "topic: a.b.c\n    format: debezium\n    transactions: true\n    children: [{path: items, table: items, columns: [{name: sku, type: text}]}]", "sinks[0].children", "children with transactions"},
		{"with where", "topic: a.b.c\n    format: debezium\n    transactions: true\n    where: 'value.op != \"r\"'", "sinks[0].where", "table.include.list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := load(t, "sinks:\n  - "+tc.sink+"\n").Validate()
			var fe *sinks.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v, want a FieldError", err)
			}
			found := false
			for _, e := range unjoin(err) {
				if errors.As(e, &fe) && fe.Field == tc.field && strings.Contains(fe.Error(), tc.says) {
					found = true
				}
			}
			if !found {
				t.Fatalf("error %v, want a FieldError of %s saying %q", err, tc.field, tc.says)
			}
		})
	}
}

func TestTransactionsSinksOfOneSourceMustAgreeAndLeaveItsTopicToIt(t *testing.T) {
	t.Parallel()
	for key, says := range map[string]string{"on_incomplete: apply": "disagree on on_incomplete", "retain_ends: 2000": "disagree on retain_ends and orphan_after"} {
		err := load(t, `sinks:
  - topic: bank.public.a
    format: debezium
    transactions: true
  - topic: bank.public.b
    format: debezium
    transactions: true
    `+key+"\n").Validate()
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("two sinks of one source, one with %s: %v, want an error saying %q", key, err, says)
		}
	}
	err := load(t, `sinks:
  - topic: bank.public.a
    format: debezium
    transactions: true
  - topic: bank.transaction
`).Validate()
	if err == nil || !strings.Contains(err.Error(), "has a sink of its own") {
		t.Errorf("a sink of the transaction topic: %v, want an error", err)
	}
}

// unjoin flattens joined errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

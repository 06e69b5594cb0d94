package sinks_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/sinks"
)

// Soft deletes and the version are refused where they mean nothing, with
// a FieldError naming the sink's key and the fix.
func TestSoftDeleteAndVersionErrorsNameTheirKey(t *testing.T) {
	t.Parallel()
	upsert := "sinks:\n  - topic: t\n    mode: upsert\n    key: [id]\n    columns:\n      - {name: id, type: bigint, from: key, path: id, not_null: true}\n      - {name: rev, type: bigint}\n      - {name: note, type: text}\n"
	for _, c := range []struct{ name, text, field, want string }{
		{"delete soft on an append sink", "sinks:\n  - {topic: t, delete: soft, columns: [{name: id, type: bigint}]}\n", "sinks[0].delete", "set mode: upsert"},
		{"delete soft without delete_on_tombstone", upsert + "    delete: soft\n", "sinks[0].delete", "set delete_on_tombstone: true"},
		{"an unknown delete", upsert + "    delete: later\n", "sinks[0].delete", `delete "later" is not hard or soft`},
		{"deleted_at without delete soft", upsert + "    deleted_at: gone\n", "sinks[0].deleted_at", "set delete: soft"},
		{"both marks", upsert + "    delete_on_tombstone: true\n    delete: soft\n    deleted_at: a\n    deleted_flag: b\n", "sinks[0].deleted_flag", "keep one"},
		{"a mark that is a column", upsert + "    delete_on_tombstone: true\n    delete: soft\n    deleted_flag: note\n", "sinks[0].deleted_flag", `column "note" is in columns`},
		{"a version naming no column", upsert + "    version: revision\n", "sinks[0].version", `version "revision" is not in columns`},
		{"a version of type text", upsert + "    version: note\n", "sinks[0].version", "is of type text"},
		{"a version in the key", upsert + "    version: id\n", "sinks[0].version", "is a key column"},
		{"a version on an append sink", "sinks:\n  - {topic: t, version: id, columns: [{name: id, type: bigint}]}\n", "sinks[0].version", "set mode: upsert"},
		{"a version with hard deletes", upsert + "    delete_on_tombstone: true\n    version: rev\n", "sinks[0].version", "set delete: soft"},
		{"a debezium version with hard deletes", "sinks:\n  - {topic: t, format: debezium, version: v}\n", "sinks[0].version", "set delete: soft"},
		{"a debezium version that is a column", "sinks:\n  - {topic: t, format: debezium, delete: soft, version: v, columns: [{name: v, type: bigint}]}\n", "sinks[0].version", "name a column of its own"},
		{"connect_json appending", "sinks:\n  - {topic: t, format: connect_json, delete: soft}\n", "sinks[0].delete", "set mode: upsert"},
		{"a connect_json version not in columns", "sinks:\n  - {topic: t, format: connect_json, mode: upsert, key: [id], columns: [{name: id, type: bigint}], version: rev}\n", "sinks[0].version", "type the version column in columns"},
		{"avro without delete_on_tombstone", "sinks:\n  - {topic: t, format: avro, mode: upsert, key: [id], delete: soft}\n", "sinks[0].delete", "set delete_on_tombstone: true"},
		{"avro with hard deletes", "sinks:\n  - {topic: t, format: avro, mode: upsert, key: [id], delete_on_tombstone: true, version: v}\n", "sinks[0].version", "set delete: soft"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := load(t, c.text).Validate()
			var fe *sinks.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Err.Error(), c.want) {
				t.Errorf("%s\nValidate: %v\nwant a FieldError of %s saying %q", c.text, err, c.field, c.want)
			}
		})
	}
	if err := load(t, upsert+"    delete_on_tombstone: true\n    delete: soft\n    version: rev\n").Validate(); err != nil {
		t.Errorf("a valid sink: %v", err)
	}
}

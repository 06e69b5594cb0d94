package cdc

import (
	"errors"
	"fmt"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Dead-letter kinds of the decoder, beside schema's.
const (
	// KindNotAnEnvelope is a record that is not a Debezium change event
	// (no op): a flattened record belongs to format connect_json.
	KindNotAnEnvelope = "not_an_envelope"
	// KindUnknownOp is an envelope whose op is not c, r, u, d, t or m.
	KindUnknownOp = "unknown_op"
	// KindNoKey is an update or delete of a table without key columns, or
	// a record whose key lacks a key column.
	KindNoKey = "no_key"
	// KindInvalidSchema is a Connect schema that does not parse.
	KindInvalidSchema = "invalid_schema"
)

// bad builds the *decode.DecodeError of r.
func bad(r *stream.Record, column, kind, format string, args ...any) *decode.DecodeError {
	return &decode.DecodeError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Column: column, Kind: kind, Err: errors.New(fmt.Sprintf(format, args...))}
}

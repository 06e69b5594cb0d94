package cdc

import (
	"errors"
	"fmt"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Op is what a change does to the target table.
type Op uint8

const (
	// OpNone changes nothing: a tombstone, a logical decoding message, or
	// an envelope the decoder skips.
	OpNone Op = iota
	// OpUpsert inserts Row, or replaces the row of Key. With OldKey set
	// the row had another key before: delete OldKey first.
	OpUpsert
	// OpDelete deletes the row of Key.
	OpDelete
	// OpTruncate empties the table.
	OpTruncate
)

func (o Op) String() string {
	switch o {
	case OpUpsert:
		return "upsert"
	case OpDelete:
		return "delete"
	case OpTruncate:
		return "truncate"
	}
	return "none"
}

// Change is one decoded record. Decode fills it, reusing the slices it
// holds, so a caller that keeps a Change past the next Decode passes a new
// one (or copies).
type Change struct {
	Op Op
	// Event is the envelope's op letter (c, r, u, d, t, m); 0 for a
	// tombstone and for plain Connect records.
	Event byte
	// Row is the row to upsert, in the columns of Table at the time of the
	// call (data, source metadata, Kafka metadata columns).
	Row []any
	// Key is the primary key of the row to upsert or delete, in
	// KeyColumns order; nil for a table without a key.
	Key []any
	// OldKey, on an upsert, is the key the row had before the update
	// changed it; nil when the key did not change.
	OldKey []any
	// Unavailable lists the indexes in Row of the columns Debezium left out
	// of the event (an unchanged TOASTed value, sent as
	// unavailable.value.placeholder): an upsert keeps their stored value,
	// and inserts NULL when there is no stored row. Their Row values are nil.
	Unavailable []int
	// Source is the envelope's source block; zero for plain records.
	Source Source
	// Transaction is the envelope's transaction block (provide.transaction
	// .metadata); ID is "" without one.
	Transaction Transaction
	// TsMs is the time the connector processed the event (the envelope's
	// ts_ms), 0 when absent.
	TsMs int64

	oldKey []any // OldKey's space, when it is nil too
}

func (c *Change) reset() {
	*c = Change{Row: c.Row[:0], Key: c.Key[:0], Unavailable: c.Unavailable[:0], oldKey: c.oldKey[:0]}
}

// Source is what the envelope says about where the change came from. A
// field the connector does not send is zero.
type Source struct {
	Connector string // postgresql, mysql, ...
	Name      string // the connector's topic.prefix
	DB        string
	Schema    string // Postgres, SQL Server
	Table     string
	TsMs      int64 // when the change was made in the source database
	// Snapshot is "true", "last", "first", "incremental", ... during a
	// snapshot, "false" or "" after.
	Snapshot string
	TxID     int64  // Postgres txId
	LSN      int64  // Postgres log sequence number
	File     string // MySQL binlog file
	Pos      int64  // MySQL binlog position
	Row      int64  // MySQL row within the binlog event
	GTID     string // MySQL GTID
}

// Transaction is the envelope's transaction block.
type Transaction struct {
	ID                  string
	TotalOrder          int64
	DataCollectionOrder int64
}

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

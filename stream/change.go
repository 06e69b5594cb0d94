package stream

// Op is what a Change does to its table.
type Op uint8

const (
	// OpNone changes nothing: a tombstone, a logical decoding message, or
	// an event the decoder skips.
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

// Change is one record decoded as a change of a table: package cdc's
// Decoder fills it, package ingest applies it (ingest.ChangeDecoder). Its
// values are a mapper's row values (Go's types and package pgvalue's). A
// decoder reuses the slices it holds, so a caller that keeps a Change past
// the next decode passes a new one (or copies).
type Change struct {
	Op Op
	// Row is the row to upsert, in the columns of the decoder's table at
	// the time of the call.
	Row []any
	// Key is the primary key of the row to upsert or delete, in the
	// decoder's key column order; nil for a table without a key.
	Key []any
	// OldKey, on an upsert, is the key the row had before the update
	// changed it; nil when the key did not change.
	OldKey []any
	// Unavailable lists the indexes in Row of the columns the source left
	// out of the event (Debezium's unchanged TOASTed values): an upsert
	// keeps their stored value, and inserts NULL when there is no stored
	// row. Their Row values are nil.
	Unavailable []int
	// Version is the change's version when the decoder gives changes one
	// (cdc.Config.Version), for a delete, whose Key holds no other column;
	// an upsert's Row holds it too. nil: none.
	Version any
}

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
	// Tx is the source transaction the change belongs to (Debezium's
	// transaction block); its ID is "" when the event carries none.
	Tx Transaction
}

// Transaction places a change in its source transaction, as Debezium's
// transaction metadata (provide.transaction.metadata) does.
type Transaction struct {
	// ID names the source transaction: Debezium's transaction.id, but
	// for Postgres ("571:53195832": txId and the event's LSN) the txId
	// alone, which its END record shares; "" when the event carries no
	// transaction block.
	ID string
	// TotalOrder is the event's position among all the transaction's
	// events, from 1.
	TotalOrder int64
	// Collection is the source table ("public.accounts"), as the END
	// record's data_collections name it; CollectionOrder is the event's
	// position among the transaction's events of that table, from 1.
	Collection      string
	CollectionOrder int64
}

// TxBoundary is one record of a transaction topic: the BEGIN or the END
// of a source transaction (package cdc's ParseBoundary reads Debezium's).
type TxBoundary struct {
	// End is true for an END record, false for a BEGIN.
	End bool
	// ID is the transaction's id, as its changes' Transaction.ID.
	ID string
	// EventCount is the number of change events of the transaction (END
	// only).
	EventCount int64
	// Collections counts them per source table (END only), by the names
	// of the changes' Transaction.Collection.
	Collections map[string]int64
}

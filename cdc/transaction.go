package cdc

import (
	"encoding/json"
	"strings"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Debezium's transaction metadata (provide.transaction.metadata=true) puts
// a transaction block in every change event of a source transaction, and
// a BEGIN and an END record for each transaction on the connector's
// transaction topic (<topic.prefix>.transaction). The END record says how
// many events the transaction has, in all and per table; it is what tells
// a consumer that it holds every event of a transaction.

// transactionOf is the stream.Transaction of the event env was read from;
// a zero one when the event carries no transaction block.
func (env *envelope) transactionOf() stream.Transaction {
	t := env.transaction
	if t.ID == "" {
		return stream.Transaction{}
	}
	return stream.Transaction{ID: transactionKey(t.ID), TotalOrder: t.TotalOrder, CollectionOrder: t.DataCollectionOrder,
		Collection: env.source.collection()}
}

// transactionKey is the id that names one source transaction in its
// events and its END record alike. Debezium's Postgres connector writes
// "txId:LSN" with the LSN of each event in the events and the commit's in
// the END record, so only the txId names the transaction: an id of two
// decimal numbers is keyed by the first. Other connectors' ids (MySQL's
// GTID "uuid:n" or "file:pos", SQL Server's three hexadecimal parts) stay
// whole.
func transactionKey(id string) string {
	xid, lsn, ok := strings.Cut(id, ":")
	if !ok || !decimal(xid) || !decimal(lsn) {
		return id
	}
	return xid
}

func decimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// collection names the source table as the END record's data_collections
// do: schema.table for the Postgres connector (and any with a schema),
// db.table for MySQL's.
func (s *sourceBlock) collection() string {
	switch {
	case s.Connector == "sqlserver" && s.DB != "":
		return s.DB + "." + s.Schema + "." + s.Table
	case s.Schema != "":
		return s.Schema + "." + s.Table
	case s.DB != "":
		return s.DB + "." + s.Table
	}
	return s.Table
}

// boundaryJSON is a transaction topic record's payload.
type boundaryJSON struct {
	Status          string `json:"status"`
	ID              string `json:"id"`
	EventCount      *int64 `json:"event_count"`
	DataCollections []struct {
		DataCollection string `json:"data_collection"`
		EventCount     int64  `json:"event_count"`
	} `json:"data_collections"`
}

// ParseBoundary reads a transaction topic record, written by the
// JsonConverter with or without its schema. A record that is not a BEGIN
// or an END is a *decode.DecodeError (errors.Is decode.ErrBadRecord); a
// tombstone is ok == false.
func ParseBoundary(rec *stream.Record) (b stream.TxBoundary, ok bool, err error) {
	if rec.Value == nil {
		return stream.TxBoundary{}, false, nil
	}
	var wrapped struct {
		Schema  json.RawMessage `json:"schema"`
		Payload json.RawMessage `json:"payload"`
	}
	body := rec.Value
	if err := json.Unmarshal(rec.Value, &wrapped); err != nil {
		return stream.TxBoundary{}, false, bad(rec, "", decode.KindInvalidJSON, "a transaction topic record: %s", err)
	}
	if len(wrapped.Payload) > 0 && string(wrapped.Payload) != "null" {
		body = wrapped.Payload
	}
	var j boundaryJSON
	if err := json.Unmarshal(body, &j); err != nil {
		return stream.TxBoundary{}, false, bad(rec, "", decode.KindInvalidJSON, "a transaction topic record: %s", err)
	}
	if j.ID == "" {
		return stream.TxBoundary{}, false, bad(rec, "id", KindNotAnEnvelope, "a transaction topic record without an id")
	}
	j.ID = transactionKey(j.ID)
	switch j.Status {
	case "BEGIN":
		return stream.TxBoundary{ID: j.ID}, true, nil
	case "END":
	default:
		return stream.TxBoundary{}, false, bad(rec, "status", KindNotAnEnvelope, "a transaction topic record of status %q, not BEGIN or END", j.Status)
	}
	if j.EventCount == nil || *j.EventCount < 0 {
		return stream.TxBoundary{}, false, bad(rec, "event_count", KindNotAnEnvelope, "an END record of transaction %q without an event_count", j.ID)
	}
	b = stream.TxBoundary{End: true, ID: j.ID, EventCount: *j.EventCount, Collections: make(map[string]int64, len(j.DataCollections))}
	for _, c := range j.DataCollections {
		b.Collections[c.DataCollection] += c.EventCount
	}
	return b, true, nil
}

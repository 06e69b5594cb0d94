package cdc

import (
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

// boundary is what a transaction topic record says.
type boundary struct {
	status, id  string
	count       int64
	hasCount    bool
	collections map[string]int64
}

// ParseBoundary reads a transaction topic record, written by the
// JsonConverter with or without its schema. A record that is not a BEGIN
// or an END is a *decode.DecodeError (errors.Is decode.ErrBadRecord); a
// tombstone is ok == false.
//
// It reads the record with the strict reader of the change events, and
// skips the schema without building it: a source writes one BEGIN and one
// END per transaction, as many records as a small transaction's events.
func ParseBoundary(rec *stream.Record) (b stream.TxBoundary, ok bool, err error) {
	if rec.Value == nil {
		return stream.TxBoundary{}, false, nil
	}
	var r reader
	r.reset(rec.Value)
	// The boundary is the payload, when the record has one that is not
	// null; else the record itself (schemas.enable=false).
	body := 0
	if r.object() {
		for first := true; ; first = false {
			key, ok := r.member(first)
			if !ok {
				break
			}
			switch {
			case string(key) != "payload":
			case r.null():
				body = 0
				continue
			default:
				body = r.i
			}
			r.skip()
		}
		r.end()
	}
	var j boundary
	if r.err == nil {
		if r.i, r.depth = body, 0; r.peek() != '{' {
			r.fail(decode.KindInvalidJSON, "the payload is %s, not an object", what(&r))
		}
	}
	readBoundary(&r, &j)
	if r.err != nil {
		return stream.TxBoundary{}, false, bad(rec, "", r.err.kind, "a transaction topic record: %s", r.err.msg)
	}
	if j.id == "" {
		return stream.TxBoundary{}, false, bad(rec, "id", KindNotAnEnvelope, "a transaction topic record without an id")
	}
	j.id = transactionKey(j.id)
	switch j.status {
	case "BEGIN":
		return stream.TxBoundary{ID: j.id}, true, nil
	case "END":
	default:
		return stream.TxBoundary{}, false, bad(rec, "status", KindNotAnEnvelope, "a transaction topic record of status %q, not BEGIN or END", j.status)
	}
	if !j.hasCount || j.count < 0 {
		return stream.TxBoundary{}, false, bad(rec, "event_count", KindNotAnEnvelope, "an END record of transaction %q without an event_count", j.id)
	}
	if j.collections == nil {
		j.collections = map[string]int64{}
	}
	return stream.TxBoundary{End: true, ID: j.id, EventCount: j.count, Collections: j.collections}, true, nil
}

// readBoundary reads the object r is at into j: status, id, event_count
// and data_collections, the last one of each name; other members are
// skipped. A member of another type fails r.
func readBoundary(r *reader, j *boundary) {
	if !r.object() {
		return
	}
	for first := true; ; first = false {
		key, ok := r.member(first)
		if !ok {
			return
		}
		switch string(key) {
		case "status":
			j.status = boundaryString(r, "status")
		case "id":
			j.id = boundaryString(r, "id")
		case "event_count":
			j.count, j.hasCount = boundaryInt(r, "event_count")
		case "data_collections":
			j.collections = nil
			if r.null() {
				continue
			}
			if r.peek() != '[' {
				r.fail(decode.KindInvalidJSON, "data_collections is %s, not an array", what(r))
				return
			}
			r.array()
			j.collections = map[string]int64{}
			for first := true; r.elem(first); first = false {
				readCollection(r, j.collections)
			}
		default:
			r.skip()
		}
	}
}

// readCollection reads one element of data_collections into counts.
func readCollection(r *reader, counts map[string]int64) {
	if r.null() {
		counts[""] += 0 // as encoding/json read it: a collection "" of no events
		return
	}
	if r.peek() != '{' {
		r.fail(decode.KindInvalidJSON, "an element of data_collections is %s, not an object", what(r))
		return
	}
	r.object()
	var name string
	var n int64
	for first := true; ; first = false {
		key, ok := r.member(first)
		if !ok {
			break
		}
		switch string(key) {
		case "data_collection":
			name = boundaryString(r, "data_collection")
		case "event_count":
			n, _ = boundaryInt(r, "event_count")
		default:
			r.skip()
		}
	}
	counts[name] += n
}

// boundaryString reads a string member, "" for null.
func boundaryString(r *reader, name string) string {
	switch r.peek() {
	case 'n':
		r.null()
		return ""
	case '"':
		return string(r.str())
	}
	r.fail(decode.KindInvalidJSON, "%s is %s, not a string", name, what(r))
	return ""
}

// boundaryInt reads an integer member; ok is false for null.
func boundaryInt(r *reader, name string) (n int64, ok bool) {
	if r.null() {
		return 0, false
	}
	c := r.peek()
	if c != '-' && (c < '0' || c > '9') {
		r.fail(decode.KindInvalidJSON, "%s is %s, not an integer", name, what(r))
		return 0, false
	}
	text := r.number()
	if r.err != nil {
		return 0, false
	}
	n, err := parseInt(text, 64)
	if err != nil {
		r.fail(decode.KindInvalidJSON, "%s is %s, not a 64-bit integer", name, text)
		return 0, false
	}
	return n, true
}

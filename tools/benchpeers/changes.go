package main

import (
	"strconv"
	"strings"
)

// The changes scenario's records are Debezium change events of a table
// "events" of the 12 fields with the primary key id, as Debezium's
// Postgres connector writes them with the JsonConverter (schemas on, for
// the key and the value; cdc/testdata holds recorded ones): the key
// {"id": N} with its schema, the value the envelope (before, after,
// source, transaction, op, ts_ms) with its schema. Event i is a create of a
// new key when i%10 == 0, a delete of a live key (followed by its
// tombstone, as tombstones.on.delete=true) when i%100 == 55 outside the
// last tenth of the events, and an update of a live key otherwise.

// change is event i of a changes dataset: its key, its op and, for a
// delete, the seq of the key's previous event (the before row).
type change struct {
	id   int64
	op   byte // 'c', 'u' or 'd'
	prev int32
}

// changeLog makes the n events. An update or a delete takes a key chosen
// by a hash of i among the keys created so far, the next live one from
// there, so that the updates are spread over the whole table.
func changeLog(n int) []change {
	log := make([]change, n)
	var dead []bool
	var last []int32 // per key, the seq of its latest event
	live := 0
	for i := range n {
		if i%10 == 0 {
			id := int64(len(dead))
			dead, last = append(dead, false), append(last, int32(i))
			live++
			log[i] = change{id: id, op: 'c', prev: -1}
			continue
		}
		k := int((uint64(i) * 0x9E3779B97F4A7C15 >> 17) % uint64(len(dead)))
		for dead[k] {
			k = (k + 1) % len(dead)
		}
		op := byte('u')
		// A delete always leaves a live key for the next event to take.
		if i%100 == 55 && i < n-n/10 && live > 1 {
			op = 'd'
			dead[k] = true
			live--
		}
		log[i] = change{id: int64(k), op: op, prev: last[k]}
		last[k] = int32(i)
	}
	return log
}

// changeKeySchema and changeValueSchema are the schemas of the events'
// keys and values; the source block is the Postgres connector's.
var (
	changeKeySchema   = `{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"optional":false,"name":"bench.public.events.Key"}`
	changeValueSchema = `{"type":"struct","fields":[` +
		rowSchema("bench.public.events.Value", true, "before") + `,` +
		rowSchema("bench.public.events.Value", true, "after") + `,` +
		`{"type":"struct","fields":[{"type":"string","optional":false,"field":"version"},{"type":"string","optional":false,"field":"connector"},` +
		`{"type":"string","optional":false,"field":"name"},{"type":"int64","optional":false,"field":"ts_ms"},` +
		`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},"default":"false","field":"snapshot"},` +
		`{"type":"string","optional":false,"field":"db"},{"type":"string","optional":true,"field":"sequence"},{"type":"int64","optional":true,"field":"ts_us"},` +
		`{"type":"int64","optional":true,"field":"ts_ns"},{"type":"string","optional":false,"field":"schema"},{"type":"string","optional":false,"field":"table"},` +
		`{"type":"int64","optional":true,"field":"txId"},{"type":"int64","optional":true,"field":"lsn"},{"type":"int64","optional":true,"field":"xmin"}],` +
		`"optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source"},` +
		`{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"total_order"},` +
		`{"type":"int64","optional":false,"field":"data_collection_order"}],"optional":true,"name":"event.block","version":1,"field":"transaction"},` +
		`{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"},{"type":"int64","optional":true,"field":"ts_us"},` +
		`{"type":"int64","optional":true,"field":"ts_ns"}],"optional":false,"name":"bench.public.events.Envelope","version":2}`
)

// appendChangeKey appends the key of an event: {"id": id} with its schema.
func appendChangeKey(b []byte, id int64) []byte {
	b = append(b, `{"schema":`...)
	b = append(b, changeKeySchema...)
	b = append(b, `,"payload":{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	return append(b, `}}`...)
}

// appendChange appends the envelope of event i: a create or an update
// has no before (REPLICA IDENTITY DEFAULT) and the row of seq i after; a
// delete the key's previous row before and no after. With txSize, event i
// is in source transaction i/txSize (its txId and transaction block,
// changestx.go); else each event is a transaction of its own, without a
// transaction block.
func appendChange(b []byte, i int, c change, txSize int) []byte {
	b = append(b, `{"schema":`...)
	b = append(b, changeValueSchema...)
	b = append(b, `,"payload":{"before":`...)
	if c.op == 'd' {
		b = appendRow(b, int(c.prev), c.id)
		b = append(b, `,"after":null`...)
	} else {
		b = append(b, `null,"after":`...)
		b = appendRow(b, i, c.id)
	}
	ms := tsBase + int64(i)
	lsn := eventLSN(i)
	txID := 1000 + int64(i)
	if txSize > 0 {
		txID, _ = txOf(i, txSize)
	}
	b = append(b, `,"source":{"version":"3.0.0.Final","connector":"postgresql","name":"bench","ts_ms":`...)
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, `,"snapshot":"false","db":"postgres","sequence":"[\"`...)
	b = strconv.AppendInt(b, lsn-64, 10)
	b = append(b, `\",\"`...)
	b = strconv.AppendInt(b, lsn, 10)
	b = append(b, `\"]","ts_us":`...)
	b = strconv.AppendInt(b, ms*1000, 10)
	b = append(b, `,"ts_ns":`...)
	b = strconv.AppendInt(b, ms*1_000_000, 10)
	b = append(b, `,"schema":"public","table":"events","txId":`...)
	b = strconv.AppendInt(b, txID, 10)
	b = append(b, `,"lsn":`...)
	b = strconv.AppendInt(b, lsn, 10)
	b = append(b, `,"xmin":null},"transaction":`...)
	b = appendTxBlock(b, i, txSize)
	b = append(b, `,"op":"`...)
	b = append(b, c.op)
	b = append(b, `","ts_ms":`...)
	b = strconv.AppendInt(b, ms+3, 10)
	b = append(b, `,"ts_us":`...)
	b = strconv.AppendInt(b, (ms+3)*1000, 10)
	b = append(b, `,"ts_ns":`...)
	b = strconv.AppendInt(b, (ms+3)*1_000_000, 10)
	return append(b, `}}`...)
}

// changeCounts says how many events of each op d holds.
func (d dataset) changeCounts() (creates, updates, deletes int) {
	for _, c := range d.changes {
		switch c.op {
		case 'c':
			creates++
		case 'u':
			updates++
		default:
			deletes++
		}
	}
	return creates, updates, deletes
}

// kafka2pgChangeConfig is kafka2pg's sink of the changes scenario: format
// debezium takes the table and its key from the events' schemas.
func kafka2pgChangeConfig(topic, table string) string {
	var b strings.Builder
	b.WriteString("sinks:\n  - topic: " + topic + "\n    table: " + table + "\n    schema: public\n    format: debezium\n")
	return b.String()
}

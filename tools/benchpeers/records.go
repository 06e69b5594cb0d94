package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/records"
)

// partitions is the partition count of every topic of the run.
const partitions = 8

// field is one field of the records' Connect schema and the column it
// becomes in both systems' tables.
type field struct {
	name     string
	connect  string // the Connect schema type
	logical  string // the Connect logical type's name, if any
	optional bool
	column   string // the Postgres column type
	extra    string // more of kafka2pg's column config (time_unit)
}

// fields are the 12 fields of every record, in the order of the payload.
// ts is a Connect Timestamp (epoch milliseconds), which the JDBC sink binds
// as a timestamp and kafka2pg reads with time_unit ms.
var fields = []field{
	{name: "id", connect: "int64", column: "bigint"},
	{name: "seq", connect: "int64", column: "bigint"},
	{name: "user_id", connect: "string", optional: true, column: "text"},
	{name: "event", connect: "string", optional: true, column: "text"},
	{name: "amount", connect: "double", optional: true, column: "double precision"},
	{name: "currency", connect: "string", optional: true, column: "text"},
	{name: "country", connect: "string", optional: true, column: "text"},
	{name: "ts", connect: "int64", logical: "org.apache.kafka.connect.data.Timestamp", column: "timestamptz", extra: ", time_unit: ms"},
	{name: "page", connect: "string", optional: true, column: "text"},
	{name: "referrer", connect: "string", optional: true, column: "text"},
	{name: "device", connect: "string", optional: true, column: "text"},
	{name: "session", connect: "string", optional: true, column: "text"},
}

// envelopeSchema is the "schema" half of every record: what Kafka Connect's
// JsonConverter writes with schemas.enable=true.
var envelopeSchema = rowSchema("bench.Event", false, "")

// rowSchema is the Connect struct schema of the 12 fields, named name; with
// field set, it is that field of an enclosing struct.
func rowSchema(name string, optional bool, field string) string {
	var b strings.Builder
	b.WriteString(`{"type":"struct","name":`)
	b.WriteString(strconv.Quote(name))
	fmt.Fprintf(&b, `,"optional":%t,"fields":[`, optional)
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":%q,"optional":%t,`, f.connect, f.optional)
		if f.logical != "" {
			fmt.Fprintf(&b, `"name":%q,"version":1,`, f.logical)
		}
		fmt.Fprintf(&b, `"field":%q}`, f.name)
	}
	b.WriteString(`]`)
	if field != "" {
		fmt.Fprintf(&b, `,"field":%q`, field)
	}
	b.WriteString(`}`)
	return b.String()
}

var (
	pages     = []string{"/", "/pricing", "/docs", "/blog", "/signup", "/cart"}
	referrers = []string{"google.com", "news.example.com", "direct", "partner.example.org", "social.example.net"}
)

// tsBase is the ts field of record 0; record i is i ms later.
var tsBase = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// dataset is a topic's worth of records: record i (0 ≤ i < n) has seq i and
// the key id(i).
type dataset struct {
	name string
	n    int
	// updates: 1 record in 10 brings a new key, the other 9 update a key
	// an earlier record brought; otherwise every record has its own key.
	updates bool
	// changes, when set, are the events of a changes dataset (changes.go):
	// record i is change event i, keyed by its id; a delete is followed
	// by its tombstone, which is not counted in n.
	changes []change
	// txEvents, when not 0, groups the changes into source transactions
	// of this many events (changestx.go).
	txEvents int
}

// newChanges is the changes dataset of n events.
func newChanges(n int) dataset { return dataset{name: "changes", n: n, changes: changeLog(n)} }

// keyed tells whether the table has a row per key rather than per record.
func (d dataset) keyed() bool { return d.updates || d.changes != nil }

// records is the number of Kafka records of d: the events and the
// tombstones.
func (d dataset) records() int {
	n := d.n
	for _, c := range d.changes {
		if c.op == 'd' {
			n++
		}
	}
	return n
}

// appendRecord appends the key and the value of record i to k and v.
func (d dataset) appendRecord(k, v []byte, i int) ([]byte, []byte) {
	if d.changes != nil {
		c := d.changes[i]
		return appendChangeKey(k, c.id), appendChange(v, i, c, d.txEvents)
	}
	id := d.id(i)
	return appendKey(k, id), appendValue(v, i, id)
}

// id is the key of record i. With updates, record i = 10k brings key k;
// any other record takes a key chosen by a hash of i among those brought
// so far (0..i/10), so the updates are spread over the whole table, not
// bunched in the batch that inserted the key.
func (d dataset) id(i int) int64 {
	if d.changes != nil {
		return d.changes[i].id
	}
	if !d.updates || i%10 == 0 {
		if d.updates {
			return int64(i / 10)
		}
		return int64(i)
	}
	h := uint64(i) * 0x9E3779B97F4A7C15
	return int64((h >> 17) % uint64(i/10+1))
}

// partition places a record by its key, so that every change of one key is
// in one partition, in order, as a keyed producer would place it.
func partition(id int64) int32 { return int32(id % partitions) }

// appendValue appends the JSON envelope of record i with key id.
func appendValue(b []byte, i int, id int64) []byte {
	b = append(b, `{"schema":`...)
	b = append(b, envelopeSchema...)
	b = append(b, `,"payload":`...)
	b = appendRow(b, i, id)
	return append(b, '}')
}

// appendRow appends the 12 fields of record i with key id as a JSON object.
func appendRow(b []byte, i int, id int64) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = records.AppendEventFields(b, i)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, tsBase+int64(i), 10)
	b = records.AppendString(b, `,"page":`, pages[i%len(pages)])
	b = records.AppendString(b, `,"referrer":`, referrers[i%len(referrers)])
	b = records.AppendString(b, `,"device":`, records.Devices[i%len(records.Devices)])
	b = append(b, `,"session":"s`...)
	b = records.AppendPadded(b, i*7919%100_000_000, 8)
	return append(b, `"}`...)
}

// appendKey appends the record key: the id in decimal, read by the sink's
// StringConverter (kafka2pg does not read it).
func appendKey(b []byte, id int64) []byte { return strconv.AppendInt(b, id, 10) }

// meanRecordBytes is the mean key+value size over the first n records.
func (d dataset) meanRecordBytes() float64 {
	n := min(d.n, 100_000)
	total := 0
	var k, v []byte
	for i := range n {
		k, v = d.appendRecord(k[:0], v[:0], i)
		total += len(k) + len(v)
	}
	return float64(total) / float64(max(n, 1))
}

// partitionSeqs lists, per partition, the seq of its records in order.
func (d dataset) partitionSeqs() [][]int64 {
	out := make([][]int64, partitions)
	for i := range d.n {
		p := partition(d.id(i))
		out[p] = append(out[p], int64(i))
	}
	return out
}

// finalState is what the table holds once every record of d is applied: in
// upsert mode one row per key, the last record of that key (none when it
// is a delete); in append mode one row per record.
type finalState struct {
	rows   int64
	seqSum int64
	// last holds, per partition that has records, the key and seq of its
	// last record: once those rows are in an upsert table, everything
	// before them in their partitions is too (a sink writes a partition in
	// order, each flush in one transaction). The last record of a
	// partition is never a delete (changeLog makes none in the last tenth).
	last []keySeq
	// fold is, in upsert mode, the seq of each key's row.
	fold map[int64]int64
}

type keySeq struct{ id, seq int64 }

func (d dataset) final(upsert bool) finalState {
	var f finalState
	seen := make([]bool, partitions)
	for i := d.n - 1; i >= 0; i-- {
		id := d.id(i)
		if p := partition(id); !seen[p] {
			seen[p] = true
			f.last = append(f.last, keySeq{id, int64(i)})
		}
	}
	if !upsert {
		n := int64(d.n)
		f.rows, f.seqSum = n, n*(n-1)/2
		return f
	}
	f.fold = make(map[int64]int64)
	for i := range d.n {
		if d.changes != nil && d.changes[i].op == 'd' {
			delete(f.fold, d.id(i))
			continue
		}
		f.fold[d.id(i)] = int64(i)
	}
	for _, seq := range f.fold {
		f.rows++
		f.seqSum += seq
	}
	return f
}

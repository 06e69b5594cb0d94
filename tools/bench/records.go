package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
	"github.com/kafka2pg/kafka2pg/tools/internal/records"
)

// partitions is the partition count of every bench topic.
const partitions = 8

// The bench tables, in the public schema; each run drops and recreates them.
const (
	typedTable  = "bench_typed"
	rawTable    = "bench_raw"
	upsertTable = "bench_upsert" // typedTable's columns, primary key id
	// smallTable is the zero-config table of the small records
	// (smallValue): the same columns as rawTable, its own name, so that
	// each shape is a table of the report with its own ceiling.
	smallTable = "bench_raw_small"
)

// tables lists the throughput tables in the order a repetition runs them.
var tables = []string{typedTable, rawTable, smallTable}

// valueOf is the record value function of a throughput table: smallValue
// for smallTable, recordValue for the others.
func valueOf(table string) func(id int) []byte {
	if table == smallTable {
		return smallValue
	}
	return recordValue
}

// smallValue is the JSON value of small record id, about 65 bytes:
// {"id":…,"user":…,"amount":…,"ts":…}, the shape of a clickstream event.
// The ts field is epoch milliseconds.
func smallValue(id int) []byte {
	b := make([]byte, 0, 80)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, int64(id), 10)
	b = append(b, `,"user":"u`...)
	b = records.AppendPadded(b, id%100_000, 6)
	b = append(b, `","amount":`...)
	cents := id * 7919 % 100_000
	b = strconv.AppendInt(b, int64(cents/100), 10)
	b = append(b, '.')
	b = records.AppendPadded(b, cents%100, 2)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, tsBase.Add(time.Duration(id)*time.Millisecond).UnixMilli(), 10)
	return append(b, '}')
}

var (
	pages     = []string{"/", "/pricing", "/docs/exactly-once", "/blog/copy-vs-insert", "/signup", "/cart"}
	referrers = []string{"google", "newsletter", "direct", "partner-site", "social"}
)

// tsBase is the ts field of record 0; record i is i ms later.
var tsBase = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// recordValue is the JSON value of record id: deterministic, about 250 bytes.
// It is appended by hand (fmt took ~2 µs a record: at the latency scenario's
// ~100,000 records/s the harness's own producer then took a quarter of a
// core from the two the bridge and Postgres share); TestRecordValueIsTheFmtOne
// holds it to the fmt.Appendf form it replaced.
func recordValue(id int) []byte { return keyedValue(int64(id), id) }

// keyedValue is recordValue(i) with key in its id field: record i of an
// upsert scenario (upsert.go), where several records share an id.
func keyedValue(key int64, id int) []byte {
	b := make([]byte, 0, 272)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, key, 10)
	b = records.AppendEventFields(b, id)
	b = append(b, `,"ts":"`...)
	b = tsBase.Add(time.Duration(id)*time.Millisecond).AppendFormat(b, time.RFC3339Nano)
	b = records.AppendString(b, `","props":{"page":`, pages[id%len(pages)])
	b = records.AppendString(b, `,"ref":`, referrers[id%len(referrers)])
	b = records.AppendString(b, `,"device":`, records.Devices[id%len(records.Devices)])
	b = append(b, `,"session":"s`...)
	b = records.AppendPadded(b, id*7919%100_000_000, 8)
	b = append(b, `","ab":"x`...)
	b = records.AppendPadded(b, id%1000, 3)
	b = append(b, byte('a'+id%2), '"', '}', '}')
	return b
}

// meanRecordBytes is the mean key+value size of records 0..n-1 with value:
// the basis of every MB/s figure (Kafka input consumed).
func meanRecordBytes(n int, value func(id int) []byte) float64 {
	total := 0
	for id := range n {
		total += len(recordKey(id)) + len(value(id))
	}
	return float64(total) / float64(max(n, 1))
}

// recordKey is the Kafka key of record id: "u" and id%100,000 in 6 digits.
func recordKey(id int) []byte {
	return records.AppendPadded(append(make([]byte, 0, 8), 'u'), id%100_000, 6)
}

// partitionOf and offsetOf place record id: produced in id order with the
// manual partitioner, partition p holds ids p, p+8, p+16, ... at offsets 0,
// 1, 2, ..., so the ceiling can build the rows the bridge will write.
func partitionOf(id int) int32 { return int32(id % partitions) }
func offsetOf(id int) int64    { return int64(id / partitions) }

// schemaRecord is record id, its value from value, as the bridge sees it.
func schemaRecord(topic string, id int, ts time.Time, value func(id int) []byte) *stream.Record {
	return &stream.Record{Topic: topic, Partition: partitionOf(id), Offset: offsetOf(id), Timestamp: ts,
		TimestampType: stream.TimestampCreateTime, Key: recordKey(id), Value: value(id)}
}

// typedColumns is the typed table: eight columns from the JSON value and two
// of Kafka metadata. configYAML writes the same mapping for the bridge.
var typedColumns = []decode.ColumnSpec{
	{Name: "id", Path: "id", Type: "bigint", NotNull: true},
	{Name: "user_id", Path: "user_id", Type: "text"},
	{Name: "event", Path: "event", Type: "text"},
	{Name: "amount", Path: "amount", Type: "numeric(12,2)"},
	{Name: "currency", Path: "currency", Type: "varchar(3)"},
	{Name: "country", Path: "country", Type: "text"},
	{Name: "ts", Path: "ts", Type: "timestamptz"},
	{Name: "props", Path: "props", Type: "jsonb"},
}

func typedSpec() decode.MappingSpec {
	return decode.MappingSpec{Schema: "public", Table: typedTable, Columns: typedColumns,
		Metadata: decode.MetadataSpec{Partition: "kafka_partition", Offset: "kafka_offset"}}
}

// upsertSpec is typedSpec in upsert mode by id, into its own table.
func upsertSpec() decode.MappingSpec {
	s := typedSpec()
	s.Table, s.Key = upsertTable, []string{"id"}
	return s
}

// configYAML is the bridge's --config for the typed sink of topic: into
// typedTable in append mode, or into upsertTable in upsert mode by id.
func configYAML(topic, table string) string {
	var b strings.Builder
	mode := "append"
	if table == upsertTable {
		mode = "upsert\n    key: [id]"
	}
	fmt.Fprintf(&b, "sinks:\n  - topic: %s\n    table: %s\n    schema: public\n    mode: %s\n    columns:\n", topic, table, mode)
	for _, c := range typedColumns {
		fmt.Fprintf(&b, "      - {name: %s, path: %s, type: %q, not_null: %t}\n", c.Name, c.Path, c.Type, c.NotNull)
	}
	b.WriteString("    metadata: {partition: kafka_partition, offset: kafka_offset}\n")
	return b.String()
}

// kafka is the broker the bench produces to and consumes from.
type kafka struct {
	brokers []string
	admin   *kadm.Client
	cl      *kgo.Client
}

// producerLinger is Kafka's own producer default since 4.0 (linger.ms 5,
// KIP-1030). The latency scenario's producer shares the two cores with the
// bridge, its broker and Postgres: at 2 ms (before) kfake served ~2.5× as
// many produce requests and fetches and took ~0.1 core more. A record's
// latency still counts its wait in the producer: its timestamp is the time
// it was handed over.
const producerLinger = 5 * time.Millisecond

func newKafka(brokers []string) (*kafka, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(200_000), kgo.ProducerLinger(producerLinger))
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return &kafka{brokers: brokers, admin: kadm.NewClient(cl), cl: cl}, nil
}

func (k *kafka) Close() { k.cl.Close() }

// create creates topic with 8 partitions (replication factor 1).
func (k *kafka) create(ctx context.Context, topic string) error {
	resp, err := k.admin.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// fill creates topic with 8 partitions and produces records 0..n-1 into it,
// their values from value, waiting until Kafka acknowledged them all.
func (k *kafka) fill(ctx context.Context, topic string, n int, value func(id int) []byte) error {
	return k.fillWith(ctx, topic, n, func(id int) (int32, []byte, []byte) { return partitionOf(id), recordKey(id), value(id) })
}

// fillWith is fill with the partition, key and value of record i from
// record.
func (k *kafka) fillWith(ctx context.Context, topic string, n int, record func(i int) (partition int32, key, value []byte)) error {
	if err := k.create(ctx, topic); err != nil {
		return err
	}
	p := newProducing()
	for i := range n {
		part, key, value := record(i)
		k.cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: part, Key: key, Value: value}, p.promise)
	}
	return p.flush(ctx, k.cl, topic)
}

// produceAt produces records 0, 1, ... to topic at rate records/s for dur,
// each stamped with the time it was handed to the client, and returns how
// many, and how long handing them over took, once Kafka acknowledged them
// all. It paces every millisecond. The records' keys and values are built
// before the clock starts (prebuilt): the producer shares the two cores
// with the bridge and Postgres, and building them as it went took a sixth
// of its CPU, and their garbage most of its collector's.
func (k *kafka) produceAt(ctx context.Context, topic string, rate float64, dur time.Duration) (int, time.Duration, error) {
	n := int(math.Ceil(rate * dur.Seconds()))
	if size := prebuiltBytes(n); size > maxPrebuilt {
		return 0, 0, fmt.Errorf("a latency window of %s at %s records/s holds %s records, %.1f GiB built beforehand, over the %d GiB the bench allows: shorten -latency",
			dur, figures.Num(rate, 0), figures.Num(float64(n), 0), float64(size)/(1<<30), maxPrebuilt>>30)
	}
	recs := prebuild(n)
	p := newProducing()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	t0 := time.Now()
	sent := 0
	for {
		elapsed := time.Since(t0)
		due := min(int(rate*min(elapsed, dur).Seconds()), recs.n())
		for ; sent < due; sent++ {
			key, value := recs.record(sent)
			p.produce(ctx, k.cl, topic, sent, key, value, time.Now())
		}
		if elapsed >= dur {
			paced := time.Since(t0)
			return sent, paced, p.flush(ctx, k.cl, topic)
		}
		select {
		case <-ctx.Done():
			return sent, time.Since(t0), ctx.Err()
		case <-tick.C:
		}
	}
}

// maxPrebuilt bounds the bytes produceAt builds beforehand: make bench's
// 20 s at about 100,000 records/s take about 550 MB.
const maxPrebuilt = 4 << 30

// prebuilt holds the keys and values of records 0..n-1 in one pointer-free
// buffer, which the collector does not scan: record id's key is
// buf[ends[2id-1]:ends[2id]] (from 0 for id 0), its value up to ends[2id+1].
type prebuilt struct {
	buf  []byte
	ends []int
}

func prebuild(n int) prebuilt {
	b := prebuilt{buf: make([]byte, 0, prebuiltBytes(n)), ends: make([]int, 0, 2*n)}
	for id := range n {
		b.buf = append(b.buf, recordKey(id)...)
		b.ends = append(b.ends, len(b.buf))
		b.buf = append(b.buf, recordValue(id)...)
		b.ends = append(b.ends, len(b.buf))
	}
	return b
}

// prebuiltBytes is about the bytes of n records' keys and values: record 0's
// and a margin for longer ids.
func prebuiltBytes(n int) int { return n * (len(recordKey(0)) + len(recordValue(0)) + 16) }

func (b prebuilt) n() int { return len(b.ends) / 2 }

// record returns the key and value of record id, sharing b's buffer (capped,
// so that no append reaches the next record).
func (b prebuilt) record(id int) (key, value []byte) {
	start := 0
	if id > 0 {
		start = b.ends[2*id-1]
	}
	k, v := b.ends[2*id], b.ends[2*id+1]
	return b.buf[start:k:k], b.buf[k:v:v]
}

// producing keeps the first error of asynchronous produces.
type producing struct {
	mu      sync.Mutex
	failed  error
	promise func(*kgo.Record, error) // one func for every record, not a closure each
}

func newProducing() *producing {
	p := &producing{}
	p.promise = func(_ *kgo.Record, err error) {
		if err != nil {
			p.mu.Lock()
			p.failed = cmp.Or(p.failed, err)
			p.mu.Unlock()
		}
	}
	return p
}

// produce hands record id with key and value to cl, with timestamp ts
// (zero: kgo's now).
func (p *producing) produce(ctx context.Context, cl *kgo.Client, topic string, id int, key, value []byte, ts time.Time) {
	cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: partitionOf(id), Key: key, Value: value, Timestamp: ts}, p.promise)
}

// flush waits until Kafka acknowledged every record handed to cl.
func (p *producing) flush(ctx context.Context, cl *kgo.Client, topic string) error {
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed != nil {
		return fmt.Errorf("produce to %s: %w", topic, p.failed)
	}
	return nil
}

// drop deletes topic, so the broker frees its records.
func (k *kafka) drop(ctx context.Context, topic string) error {
	resp, err := k.admin.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	return nil
}

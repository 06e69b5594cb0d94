package integration_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// position is where a record landed in the topic.
type position struct {
	partition int32
	offset    int64
}

// produced is what the test knows about a record it produced.
type produced struct {
	id          int64
	timestampMs int64
}

// ledger remembers, for every record a test produced and Kafka acknowledged,
// the id it carries and where it landed. The final checks compare the table
// against it. Safe for concurrent use.
type ledger struct {
	mu     sync.Mutex
	nextID int64
	at     map[position]produced
}

func newLedger() *ledger {
	return &ledger{at: make(map[position]produced)}
}

// newRecords makes n records to the topic with fresh ids. ids[i] belongs to
// rs[i].
func (l *ledger) newRecords(topic string, n int) (rs []*kgo.Record, ids []int64) {
	l.mu.Lock()
	first := l.nextID
	l.nextID += int64(n)
	l.mu.Unlock()
	rs = make([]*kgo.Record, n)
	ids = make([]int64, n)
	for i := range rs {
		ids[i] = first + int64(i)
		rs[i] = newRecord(topic, ids[i])
	}
	return rs, ids
}

// record notes where the acknowledged records landed. Two records at one
// position would mean the broker or the test is broken.
func (l *ledger) record(rs []*kgo.Record, ids []int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range rs {
		pos := position{r.Partition, r.Offset}
		if prev, dup := l.at[pos]; dup {
			return fmt.Errorf("ledger: records %d and %d both acknowledged at partition %d offset %d",
				prev.id, ids[i], pos.partition, pos.offset)
		}
		l.at[pos] = produced{id: ids[i], timestampMs: r.Timestamp.UnixMilli()}
	}
	return nil
}

// entries returns a copy of the ledger.
func (l *ledger) entries() map[position]produced {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[position]produced, len(l.at))
	for k, v := range l.at {
		m[k] = v
	}
	return m
}

// size returns the number of acknowledged records.
func (l *ledger) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.at)
}

// newRecord builds the record with the given id: key "k<id>", a JSON value
// of about 200 bytes that recordValue can rebuild from the id, and headers on
// every 10th (trace-id) and every 50th (also source) record.
func newRecord(topic string, id int64) *kgo.Record {
	r := &kgo.Record{
		Topic: topic,
		Key:   recordKey(id),
		Value: recordValue(id),
	}
	if id%10 == 0 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "trace-id", Value: []byte("t-" + strconv.FormatInt(id, 10))})
	}
	if id%50 == 0 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "source", Value: []byte("kafka2pg-integration")})
	}
	return r
}

// hasTraceHeader says whether newRecord gave the record with this id a
// trace-id header.
func hasTraceHeader(id int64) bool { return id%10 == 0 }

func recordKey(id int64) []byte {
	return strconv.AppendInt([]byte("k"), id, 10)
}

var (
	currencies = []string{"EUR", "USD", "GBP"}
	countries  = []string{"DE", "FR", "US", "GB", "JP"}
	statuses   = []string{"paid", "pending", "refunded", "shipped"}
	createdAt0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// recordValue is the JSON value of the record with this id, deterministic so
// checks can rebuild it. Amounts are multiples of 0.25, exact in binary and
// decimal.
func recordValue(id int64) []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"user":"u`...)
	b = strconv.AppendInt(b, id%1000, 10)
	b = append(b, `","amount":`...)
	b = strconv.AppendFloat(b, float64(id%40000)/4, 'f', -1, 64)
	b = append(b, `,"currency":"`...)
	b = append(b, currencies[id%int64(len(currencies))]...)
	b = append(b, `","country":"`...)
	b = append(b, countries[id%int64(len(countries))]...)
	b = append(b, `","status":"`...)
	b = append(b, statuses[id%int64(len(statuses))]...)
	b = append(b, `","created_at":"`...)
	b = createdAt0.Add(time.Duration(id)*time.Second).AppendFormat(b, time.RFC3339)
	b = append(b, `","items":[{"sku":"sku-`...)
	b = strconv.AppendInt(b, id%5000, 10)
	b = append(b, `","qty":`...)
	b = strconv.AppendInt(b, 1+id%7, 10)
	b = append(b, `}],"note":"order `...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, ` for customer u`...)
	b = strconv.AppendInt(b, id%1000, 10)
	b = append(b, `"}`...)
	return b
}

// producer is a goroutine that keeps producing ledgered records in small
// batches until it is stopped or has produced its limit.
type producer struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	err      error // set before done is closed
	count    atomic.Int64
}

// startProducer starts producing batches of batch records with pause between
// them, at most limit records in all. The test must call stopAndCheck; if it
// fails first, cleanup stops and joins the goroutine.
func (s *scenario) startProducer(t testing.TB, batch int, pause time.Duration, limit int) *producer {
	t.Helper()
	return startProducing(t, batch, pause, limit, func(ctx context.Context, n int) error {
		rs, ids := s.ledger.newRecords(s.topic, n)
		if err := s.kafka.TryProduce(ctx, rs...); err != nil {
			return err
		}
		return s.ledger.record(rs, ids)
	})
}

// startProducing starts a producer whose goroutine calls produce(ctx, n)
// for batches of n records (batch at most) with pause between them, until
// limit records, an error of produce, or stopAndCheck. Cleanup stops and
// joins the goroutine if the test ends first.
func startProducing(t testing.TB, batch int, pause time.Duration, limit int, produce func(ctx context.Context, n int) error) *producer {
	p := &producer{stop: make(chan struct{}), done: make(chan struct{})}
	ctx := t.Context()
	go func() {
		defer close(p.done)
		for int(p.count.Load()) < limit {
			n := min(batch, limit-int(p.count.Load()))
			if err := produce(ctx, n); err != nil {
				p.err = err
				return
			}
			p.count.Add(int64(n))
			select {
			case <-p.stop:
				return
			case <-time.After(pause):
			}
		}
	}()
	t.Cleanup(func() {
		p.stopOnce.Do(func() { close(p.stop) })
		<-p.done
	})
	return p
}

// stopAndCheck stops the producer after its current batch, waits for it, and
// fails the test if producing failed. It returns how many records it produced.
func (p *producer) stopAndCheck(t testing.TB) int64 {
	t.Helper()
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
	if p.err != nil {
		t.Fatalf("producer: %v", p.err)
	}
	return p.count.Load()
}

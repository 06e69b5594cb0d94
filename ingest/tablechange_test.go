package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// growingMapper maps {"a": 1, "b": 2, ...} to one bigint column per member,
// like a registry mapper whose subject gains a field with each version: a
// record with a member the table lacks grows the table and reports
// decode.ErrTableChanged.
type growingMapper struct {
	mu   sync.Mutex
	cols []string
}

func (m *growingMapper) Table() schema.Table {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := schema.Table{Schema: "public", Name: "growing"}
	for _, c := range m.cols {
		t.Columns = append(t.Columns, schema.Column{Name: c, Type: "bigint"})
	}
	return t
}

func (m *growingMapper) Row(r *stream.Record, dst []any) ([]any, error) {
	var doc map[string]int64
	if err := json.Unmarshal(r.Value, &doc); err != nil {
		return nil, &decode.DecodeError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Kind: decode.KindInvalidJSON, Err: err}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	grew := false
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range doc {
			if !yield(k) {
				return
			}
		}
	}) {
		if !slices.Contains(m.cols, name) {
			m.cols = append(m.cols, name)
			grew = true
		}
	}
	if grew {
		return nil, fmt.Errorf("record %d: %w", r.Offset, decode.ErrTableChanged)
	}
	dst = dst[:0]
	for _, c := range m.cols {
		if v, ok := doc[c]; ok {
			dst = append(dst, v)
		} else {
			dst = append(dst, nil)
		}
	}
	return dst, nil
}

func TestATableMapperGrowsTheTableAndNoRecordIsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.MigratedPool(t)
	m := &growingMapper{cols: []string{"a"}}
	w := readyWriter(t, pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{topic: {Table: m.Table(), Mapper: m}}})
	// Two partitions write at once; the records of each bring new members
	// partway through, so one partition's change lands while the other's
	// batch runs with the table it started with.
	const perPartition = 200
	value := func(p int32, o int64) []byte {
		doc := map[string]int64{"a": o}
		if o >= perPartition/4 {
			doc[fmt.Sprintf("p%d_x", p)] = o
		}
		if o >= perPartition/2 {
			doc["shared_y"] = o
		}
		b, _ := json.Marshal(doc)
		return b
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for p := int32(0); p < 2; p++ {
		pos := claim(t, w, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := int64(0); first < perPartition; first += 20 {
				b := &stream.Batch{Topic: topic, Partition: p, Epoch: pos.Epoch, PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + 20, LeaderEpoch: -1, LogEndOffset: -1}
				for o := first; o < first+20; o++ {
					b.Records = append(b.Records, stream.Record{Topic: topic, Partition: p, Offset: o, Value: value(p, o)})
				}
				if err := w.Write(ctx, b); err != nil {
					errs <- fmt.Errorf("partition %d batch at %d: %w", p, first, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM public.growing`); n != 2*perPartition {
		t.Fatalf("rows: %d, want %d", n, 2*perPartition)
	}
	for _, q := range []struct {
		sql  string
		want int64
	}{
		{`SELECT count(*) FROM public.growing WHERE a IS NULL`, 0},
		{`SELECT count(*) FROM public.growing WHERE p0_x IS NOT NULL`, perPartition - perPartition/4},
		{`SELECT count(*) FROM public.growing WHERE p1_x IS NOT NULL`, perPartition - perPartition/4},
		{`SELECT count(*) FROM public.growing WHERE shared_y IS NOT NULL`, 2 * (perPartition - perPartition/2)},
		{`SELECT count(*) FROM public.growing WHERE shared_y IS NOT NULL AND shared_y <> a`, 0},
		{`SELECT count(*) FROM kafka2pg.dead_letters`, 0},
		{`SELECT count(*) FROM kafka2pg.offsets WHERE next_offset = 200`, 2},
	} {
		if got := queryInt(t, pool, q.sql); got != q.want {
			t.Errorf("%s: %d, want %d", q.sql, got, q.want)
		}
	}
}

func TestAMapperErrorThatIsNotAboutTheRecordIsNeverDeadLettered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := newWriter(t, "g")
	m := failingMapper{err: errors.New("registry unreachable")}
	w2, err := ingest.New(pool, ingest.Config{Group: "g2", Sinks: map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: m}}})
	if err != nil {
		t.Fatal(err)
	}
	pos, err := w2.Claim(ctx, topic, []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	b := batch(0, pos[0].Epoch, 0, 10)
	if err := w2.Write(ctx, b); err == nil || !errors.Is(err, m.err) {
		t.Fatalf("Write: %v, want the mapper's error", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters`); n != 0 {
		t.Fatalf("%d dead letters for an error that is not about a record", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.offsets WHERE consumer_group = 'g2' AND next_offset IS NOT NULL`); n != 0 {
		t.Fatalf("the offsets advanced past records that were not written")
	}
}

type failingMapper struct{ err error }

func (m failingMapper) Row(*stream.Record, []any) ([]any, error) { return nil, m.err }

package ingest_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// traces keeps the last BatchTrace of each partition, which tests read what
// a Write did from.
type traces struct {
	mu   sync.Mutex
	last map[int32]ingest.BatchTrace
	n    int
}

// trace makes w tell a new traces of every Write; call it before writing.
func trace(w *ingest.Writer) *traces {
	tr := &traces{last: map[int32]ingest.BatchTrace{}}
	ingest.SetTracer(w, tr)
	return tr
}

func (tr *traces) TraceBatchEnd(_ context.Context, bt ingest.BatchTrace) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.last[bt.Batch.Partition] = bt
	tr.n++
}

// write writes b with w (whose tracer is tr) and returns what tr heard of it.
// A partition's writes must not run concurrently with each other.
func (tr *traces) write(ctx context.Context, w *ingest.Writer, b *stream.Batch) (ingest.BatchTrace, error) {
	err := w.Write(ctx, b)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.last[b.Partition], err
}

// The tracer hears of every Write, failed ones included, with the batch,
// the table and the error Write returned.
func TestTheTracerHearsOfEveryWrite(t *testing.T) {
	t.Parallel()
	w, _ := newWriter(t, "g")
	tr := trace(w)
	ctx := context.Background()
	c := claim(t, w, 0)
	b := batch(0, c.Epoch, 0, 5)
	got, err := tr.write(ctx, w, b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Batch != b || got.Table != `"public"."orders"` || got.Err != nil || got.Rows != 5 || got.CopyDuration <= 0 || got.CommitDuration <= 0 {
		t.Fatalf("trace of a committed write = %+v, want the batch, the table, 5 rows and both durations", got)
	}
	claim(t, w, 0)
	got, err = tr.write(ctx, w, batch(0, c.Epoch, 5, 10))
	if !errors.Is(err, stream.ErrFenced) || got.Err != err || got.Rows != 0 || got.CommitDuration != 0 {
		t.Fatalf("trace of a fenced write = %+v (Write: %v), want the fenced error and nothing written", got, err)
	}
	if tr.n != 2 {
		t.Fatalf("the tracer heard of %d writes, want 2", tr.n)
	}
}

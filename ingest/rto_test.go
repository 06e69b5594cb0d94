package ingest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// The step deadlines against a real Postgres, with the default ceiling of 2
// minutes: once the writes measured a fast database, a write that stops
// getting answers is cut at the floor; a write that takes long in
// proportion to its bytes is not cut.

// measuredWriter is a Writer into "orders" with the default write timeout,
// its table ready, that wrote batches of rows rows n times on partition 0:
// its estimates hold what they took. It returns the writer, the claim's
// epoch and the next offset.
func measuredWriter(t *testing.T, n, rows int) (w *ingest.Writer, epoch, next int64, url string) {
	t.Helper()
	url, pool := pgtest.MigratedPool(t)
	w = readyWriter(t, pool, ingest.Config{Group: "g", ClaimLockTimeout: 300 * time.Millisecond,
		Sinks: map[string]ingest.Sink{topic: {Table: decode.RawTable("public", topic, decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}}})
	epoch = claim(t, w, 0).Epoch
	for range n {
		if err := w.Write(t.Context(), batch(0, epoch, next, next+int64(rows))); err != nil {
			t.Fatal(err)
		}
		next += int64(rows)
	}
	if n > 0 && len(w.Estimates()) < 4 {
		t.Fatalf("estimates after %d writes: %+v, want BEGIN, the fence, COMMIT and the table's body", n, w.Estimates())
	}
	return w, epoch, next, url
}

func TestAWriteThatGetsNoAnswerIsCutAtTheFloorOnceTheDatabaseAnsweredFast(t *testing.T) {
	t.Parallel()
	w, epoch, next, url := measuredWriter(t, 20, 100)
	ctx := t.Context()
	locker := admin(t, url)
	if _, err := locker.Exec(ctx, `BEGIN; LOCK TABLE orders IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := w.Write(ctx, batch(0, epoch, next, next+100))
	elapsed := time.Since(start)
	var de *ingest.DeadlineError
	if !errors.As(err, &de) || de.Step != ingest.StepCopy || de.Deadline != ingest.DeadlineFloor {
		t.Fatalf("write behind a lock: %v (after %s), want a *DeadlineError at copy with the floor's deadline of %s", err, elapsed, ingest.DeadlineFloor)
	}
	// The floor, not the ceiling of 2 minutes.
	if elapsed < ingest.DeadlineFloor || elapsed > ingest.DeadlineFloor+2*time.Second {
		t.Errorf("cut after %s, want at the floor of %s", elapsed, ingest.DeadlineFloor)
	}
	t.Logf("cut after %s: %v", elapsed.Round(time.Millisecond), err)

	// A second cut of the same step, by a stall that outlasts the first,
	// comes at twice the floor: a database that turned slow is not cut
	// in a loop.
	epoch = claim(t, w, 0).Epoch
	start = time.Now()
	err = w.Write(ctx, batch(0, epoch, next, next+100))
	elapsed = time.Since(start)
	if !errors.As(err, &de) || de.Deadline != 2*ingest.DeadlineFloor {
		t.Fatalf("second write behind the lock: %v (after %s), want a *DeadlineError with a deadline of %s", err, elapsed, 2*ingest.DeadlineFloor)
	}
	if _, err := locker.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	epoch = claim(t, w, 0).Epoch
	if err := w.Write(ctx, batch(0, epoch, next, next+100)); err != nil {
		t.Fatalf("the write after the lock went: %v", err)
	}
}

func TestACopyThatTakesLongInProportionToItsBytesIsNotCut(t *testing.T) {
	t.Parallel()
	w, epoch, next, url := measuredWriter(t, 0, 0)
	ctx := t.Context()
	// Every row costs the server 2 ms: the COPY's time grows
	// with the batch, as on a slow disk or a thin pipe.
	adm := admin(t, url)
	if _, err := adm.Exec(ctx, `
CREATE FUNCTION slow_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.002); RETURN NEW; END $$;
CREATE TRIGGER slow_row BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION slow_row()`); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := w.Write(ctx, batch(0, epoch, next, next+200)); err != nil {
			t.Fatal(err)
		}
		next += 200
	}
	// 20 times the rows: 8 s or more, past the floor, well within three
	// times the measured rate.
	start := time.Now()
	if err := w.Write(ctx, batch(0, epoch, next, next+4000)); err != nil {
		t.Fatalf("a batch of 4,000 slow rows after batches of 200 (after %s): %v", time.Since(start), err)
	}
	elapsed := time.Since(start)
	if elapsed < ingest.DeadlineFloor {
		t.Errorf("the batch took %s, under the floor of %s: the test proves nothing", elapsed, ingest.DeadlineFloor)
	}
	t.Logf("a batch of 4,000 slow rows took %s, uncut; estimates %+v", elapsed.Round(time.Millisecond), w.Estimates())
}

package offsets_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/offsets"
	"github.com/kafka2pg/kafka2pg/stream"
)

const topic = "orders"

func newStore(t *testing.T, group string) (*offsets.Store, *pgxpool.Pool) {
	t.Helper()
	_, pool := pgtest.MigratedPool(t)
	return storeOn(t, pool, group), pool
}

func storeOn(t *testing.T, pool *pgxpool.Pool, group string) *offsets.Store {
	t.Helper()
	st, err := offsets.New(pool, offsets.Config{Group: group, ClaimLockTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func claim(t *testing.T, st *offsets.Store, p int32) stream.Position {
	t.Helper()
	pos, err := st.Claim(context.Background(), topic, []int32{p})
	if err != nil {
		t.Fatal(err)
	}
	return pos[p]
}

// span is a batch of partition p from first to next, written by the owner
// of epoch that left next_offset at prev (-1: nothing stored).
func span(p int32, epoch, prev, first, next int64) *stream.Batch {
	return &stream.Batch{Topic: topic, Partition: p, Epoch: epoch, PrevOffset: prev, FirstOffset: first, NextOffset: next, LeaderEpoch: 4, LogEndOffset: -1}
}

// advance runs Advance in a transaction of its own and commits it unless
// Advance fails.
func advance(t *testing.T, st *offsets.Store, pool *pgxpool.Pool, b *stream.Batch) error {
	t.Helper()
	return pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error { return st.Advance(context.Background(), tx, b) })
}

// stored reads a partition's row: next_offset (-1 for NULL) and epoch.
func stored(t *testing.T, pool *pgxpool.Pool, group string, p int32) (next, epoch int64) {
	t.Helper()
	const q = `SELECT coalesce(next_offset, -1), epoch FROM kafka2pg.offsets WHERE consumer_group = $1 AND topic = $2 AND partition = $3`
	if err := pool.QueryRow(context.Background(), q, group, topic, p).Scan(&next, &epoch); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return next, epoch
}

func TestNewNeedsAGroup(t *testing.T) {
	t.Parallel()
	if _, err := offsets.New(nil, offsets.Config{}); err == nil {
		t.Fatal("New without a group succeeded")
	}
}

func TestClaimCreatesTheRowAndBumpsTheEpoch(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "g")
	first := claim(t, st, 0)
	if first.NextOffset != -1 || first.Epoch != 1 || first.LeaderEpoch != -1 {
		t.Fatalf("first claim = %+v, want next_offset -1 (nothing stored), epoch 1, leader epoch -1", first)
	}
	second := claim(t, st, 0)
	if second.Epoch != 2 {
		t.Fatalf("second claim epoch = %d, want 2", second.Epoch)
	}
}

func TestClaimReturnsWhatTheLastAdvanceStored(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t, "g")
	c := claim(t, st, 2)
	if err := advance(t, st, pool, span(2, c.Epoch, -1, 0, 10)); err != nil {
		t.Fatal(err)
	}
	pos := claim(t, st, 2)
	if pos.NextOffset != 10 || pos.LeaderEpoch != 4 || pos.Epoch != c.Epoch+1 {
		t.Fatalf("claim after an advance = %+v, want next_offset 10, leader epoch 4, epoch %d", pos, c.Epoch+1)
	}
}

// The fence: a stale epoch is refused, a rewrite of offsets already stored
// is refused, a gap is accepted, and a refused advance says what the row
// holds and changes nothing.
func TestAdvanceIsFencedByTheEpochAndTheContinuityGuard(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t, "g")
	a := claim(t, st, 0)
	if err := advance(t, st, pool, span(0, a.Epoch, -1, 0, 100)); err != nil {
		t.Fatalf("first advance: %v", err)
	}
	b := claim(t, st, 0) // a new owner: A is fenced from now on

	err := advance(t, st, pool, span(0, a.Epoch, 100, 100, 200))
	var fe *stream.FencedError
	if !errors.Is(err, stream.ErrFenced) || !errors.As(err, &fe) || fe.StoredEpoch != b.Epoch || fe.StoredOffset != 100 || fe.Epoch != a.Epoch {
		t.Fatalf("advance with the stale epoch %d = %v, want a FencedError naming the stored epoch %d and next_offset 100", a.Epoch, err, b.Epoch)
	}
	// The same epoch re-sending a span that overlaps what is stored (an
	// ambiguous commit retried blindly) must not move the offset.
	if err := advance(t, st, pool, span(0, b.Epoch, 50, 50, 150)); !errors.Is(err, stream.ErrPositionMoved) || errors.As(err, &fe) && fe.MovedBack() {
		t.Fatalf("advance from 50 over a stored next_offset of 100 = %v, want ErrPositionMoved, not moved back", err)
	}
	if next, _ := stored(t, pool, "g", 0); next != 100 {
		t.Fatalf("next_offset = %d after two fenced advances, want 100", next)
	}
	// Exactly where the last one ended, and after a gap (compaction,
	// transaction markers): both accepted.
	if err := advance(t, st, pool, span(0, b.Epoch, 100, 100, 120)); err != nil {
		t.Fatalf("advance from the stored next_offset: %v", err)
	}
	if err := advance(t, st, pool, span(0, b.Epoch, 120, 130, 140)); err != nil {
		t.Fatalf("advance after a gap: %v", err)
	}
	if next, epoch := stored(t, pool, "g", 0); next != 140 || epoch != b.Epoch {
		t.Fatalf("row = next_offset %d epoch %d, want 140 and %d", next, epoch, b.Epoch)
	}
}

// A lossy failover: Postgres loses commits the owner saw succeed, and its
// stored position moves back under the same epoch. An advance from where
// the owner left off must be refused (a guard of "not past the batch"
// would accept it and lose the rows in between), and say so; so must an
// advance whose claim was lost with them, and one whose row is gone.
func TestAdvanceRefusesAPositionThatMovedBack(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t, "g")
	ctx := context.Background()
	c := claim(t, st, 0)
	for _, b := range []*stream.Batch{span(0, c.Epoch, -1, 0, 100), span(0, c.Epoch, 100, 100, 200)} {
		if err := advance(t, st, pool, b); err != nil {
			t.Fatal(err)
		}
	}
	exec := func(q string) {
		t.Helper()
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`UPDATE kafka2pg.offsets SET next_offset = 100`) // the second commit is lost
	err := advance(t, st, pool, span(0, c.Epoch, 200, 200, 300))
	var fe *stream.FencedError
	if !errors.Is(err, stream.ErrPositionMoved) || !errors.As(err, &fe) || !fe.MovedBack() || fe.PrevOffset != 200 || fe.StoredOffset != 100 || fe.StoredEpoch != c.Epoch {
		t.Fatalf("advance from 200 over a stored 100 of the same epoch = %v, want a FencedError that moved back from 200 to 100", err)
	}
	if next, _ := stored(t, pool, "g", 0); next != 100 {
		t.Fatalf("next_offset = %d after a refused advance, want 100", next)
	}

	exec(`UPDATE kafka2pg.offsets SET next_offset = NULL`) // every commit is lost
	if err := advance(t, st, pool, span(0, c.Epoch, 200, 200, 300)); !errors.As(err, &fe) || !fe.MovedBack() || fe.StoredOffset != -1 {
		t.Fatalf("advance from 200 over nothing stored = %v, want moved back to nothing", err)
	}
	exec(`UPDATE kafka2pg.offsets SET next_offset = 200, epoch = epoch - 1`) // the claim is lost
	if err := advance(t, st, pool, span(0, c.Epoch, 200, 200, 300)); !errors.Is(err, stream.ErrPositionMoved) {
		t.Fatalf("advance of epoch %d over a stored epoch %d = %v, want ErrPositionMoved", c.Epoch, c.Epoch-1, err)
	}
	exec(`DELETE FROM kafka2pg.offsets`) // the row is lost
	if err := advance(t, st, pool, span(0, c.Epoch, 200, 200, 300)); !errors.Is(err, stream.ErrPositionMoved) {
		t.Fatalf("advance without a row = %v, want ErrPositionMoved", err)
	}

	// What is legitimate passes: a gap after the stored position, and a
	// span below it (a truncated Kafka log read again), when the stored
	// position is the one the owner left.
	c = claim(t, st, 0)
	for _, b := range []*stream.Batch{span(0, c.Epoch, -1, 40, 50), span(0, c.Epoch, 50, 70, 80), span(0, c.Epoch, 80, 60, 65)} {
		if err := advance(t, st, pool, b); err != nil {
			t.Fatalf("advance [%d, %d) from a stored %d: %v", b.FirstOffset, b.NextOffset, b.PrevOffset, err)
		}
	}
	if next, _ := stored(t, pool, "g", 0); next != 65 {
		t.Fatalf("next_offset = %d, want 65", next)
	}
}

func TestAdvanceOfAPartitionNeverClaimedIsFenced(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t, "g")
	err := advance(t, st, pool, span(5, 1, -1, 0, 10))
	var fe *stream.FencedError
	if !errors.As(err, &fe) || fe.StoredEpoch != -1 || fe.StoredOffset != -1 {
		t.Fatalf("advance without a row = %v, want a FencedError with no stored epoch or offset", err)
	}
}

// Advance is per group: another group's claim of the same partition fences
// nobody in this one.
func TestGroupsDoNotFenceEachOther(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t, "g")
	other := storeOn(t, pool, "h")
	c := claim(t, st, 0)
	claim(t, other, 0)
	if err := advance(t, st, pool, span(0, c.Epoch, -1, 0, 10)); err != nil {
		t.Fatalf("advance after another group's claim: %v", err)
	}
}

func TestLogEndOffsetIsStoredForPartitionStatus(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t, "g")
	c := claim(t, st, 0)
	b := span(0, c.Epoch, -1, 0, 10)
	b.LogEndOffset = 25
	if err := advance(t, st, pool, b); err != nil {
		t.Fatal(err)
	}
	var lag int64
	if err := pool.QueryRow(context.Background(), `SELECT lag FROM kafka2pg.partition_status WHERE consumer_group = 'g' AND partition = 0`).Scan(&lag); err != nil {
		t.Fatal(err)
	}
	if lag != 15 {
		t.Fatalf("partition_status lag = %d, want 15 (log end 25, next_offset 10)", lag)
	}
}

// A caller that pipelines the advance sends AdvanceStatement itself and
// hands the command tag to CheckAdvance: the same fence.
func TestAdvanceStatementAndCheckAdvanceAreTheFence(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t, "g")
	ctx := context.Background()
	c := claim(t, st, 0)
	run := func(b *stream.Batch) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			s := st.AdvanceStatement(b)
			if _, err := tx.Conn().Prepare(ctx, s.Name, s.SQL); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, s.Name, s.Args...)
			if err != nil {
				return err
			}
			return st.CheckAdvance(ctx, tx, b, tag)
		})
	}
	if err := run(span(0, c.Epoch, -1, 0, 10)); err != nil {
		t.Fatal(err)
	}
	if err := run(span(0, c.Epoch-1, 10, 10, 20)); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("stale epoch through the statement = %v, want ErrFenced", err)
	}
	if next, _ := stored(t, pool, "g", 0); next != 10 {
		t.Fatalf("next_offset = %d, want 10", next)
	}
}

// Rewind moves next_offset back inside the advancing transaction, so that a
// stop commits nothing past the bad record; a stale epoch cannot rewind.
func TestRewindMovesBackInsideTheAdvancingTransaction(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t, "g")
	ctx := context.Background()
	c := claim(t, st, 1)
	b := span(1, c.Epoch, -1, 0, 10)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := st.Advance(ctx, tx, b); err != nil {
			return err
		}
		return st.Rewind(ctx, tx, b, 7)
	})
	if err != nil {
		t.Fatal(err)
	}
	if next, _ := stored(t, pool, "g", 1); next != 7 {
		t.Fatalf("next_offset = %d after the rewind, want 7", next)
	}
	claim(t, st, 1)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Rewind(ctx, tx, b, 3) })
	if !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("rewind with a stale epoch = %v, want ErrFenced", err)
	}
	if next, _ := stored(t, pool, "g", 1); next != 7 {
		t.Fatalf("next_offset = %d after a fenced rewind, want still 7", next)
	}
}

// Reset moves partitions and bumps their epochs, so the owner is fenced;
// a partition without a row gets one.
func TestResetMovesAndFencesTheOwner(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t, "g")
	ctx := context.Background()
	c := claim(t, st, 0)
	if err := advance(t, st, pool, span(0, c.Epoch, -1, 0, 100)); err != nil {
		t.Fatal(err)
	}
	moves := []offsets.Move{{Topic: topic, Partition: 0, NextOffset: 40}, {Topic: topic, Partition: 1, NextOffset: 7}}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return offsets.Reset(ctx, tx, "g", moves) }); err != nil {
		t.Fatal(err)
	}
	if next, epoch := stored(t, pool, "g", 0); next != 40 || epoch != c.Epoch+1 {
		t.Fatalf("partition 0 = next_offset %d epoch %d, want 40 and %d", next, epoch, c.Epoch+1)
	}
	if next, epoch := stored(t, pool, "g", 1); next != 7 || epoch != 1 {
		t.Fatalf("partition 1 = next_offset %d epoch %d, want 7 and 1 (a new row)", next, epoch)
	}
	if err := advance(t, st, pool, span(0, c.Epoch, 100, 100, 110)); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("the owner's advance after a reset = %v, want ErrFenced", err)
	}
	if pos := claim(t, st, 0); pos.NextOffset != 40 || pos.LeaderEpoch != -1 {
		t.Fatalf("claim after the reset = %+v, want next_offset 40 and leader epoch -1", pos)
	}
}

func TestPositionsAndListReadTheRows(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t, "g")
	ctx := context.Background()
	c := claim(t, st, 0)
	claim(t, st, 1)
	claim(t, st, 1)
	if _, err := storeOn(t, pool, "h").Claim(ctx, "other", []int32{3}); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Minute)
	if err := advance(t, st, pool, span(0, c.Epoch, -1, 0, 5)); err != nil {
		t.Fatal(err)
	}
	positions, err := st.Positions(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]stream.Position{0: {Epoch: 1, NextOffset: 5, LeaderEpoch: 4}, 1: {Epoch: 2, NextOffset: -1, LeaderEpoch: -1}}
	if len(positions) != 2 || positions[0] != want[0] || positions[1] != want[1] {
		t.Fatalf("Positions = %v, want %v", positions, want)
	}

	all, err := offsets.List(ctx, pool, offsets.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].Group != "g" || all[2].Group != "h" || all[2].Topic != "other" {
		t.Fatalf("List of everything = %+v, want g's two rows, then h's", all)
	}
	got, err := offsets.List(ctx, pool, offsets.Filter{Group: "g", Topics: []string{topic}, Partitions: []int32{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("List of g = %+v, want 2 rows", got)
	}
	p0, p1 := got[0], got[1]
	if p0.Partition != 0 || p0.NextOffset != 5 || p0.Epoch != 1 || p0.CommittedAt.Before(before) {
		t.Errorf("partition 0 = %+v, want next_offset 5, epoch 1 and a commit time", p0)
	}
	if p1.Partition != 1 || p1.NextOffset != -1 || p1.Epoch != 2 || !p1.CommittedAt.IsZero() {
		t.Errorf("partition 1 = %+v, want next_offset -1 (nothing written), epoch 2, no commit time", p1)
	}
	only, err := offsets.List(ctx, pool, offsets.Filter{Partitions: []int32{3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(only) != 1 || only[0].Group != "h" {
		t.Fatalf("List of partition 3 = %+v, want h's row", only)
	}
}

func TestClaimTerminatesAZombieHoldingThePartition(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t, "g")
	ctx := context.Background()
	c := claim(t, st, 0)
	// A zombie: a writer that advanced the row and then froze mid-batch.
	zombie, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Release()
	tx, err := zombie.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Advance(ctx, tx, span(0, c.Epoch, -1, 0, 50)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pos := claim(t, st, 0) // waits ClaimLockTimeout (300ms), then terminates the zombie
	if pos.NextOffset != -1 || pos.Epoch != c.Epoch+1 {
		t.Fatalf("claim after the zombie = %+v, want nothing stored and epoch %d", pos, c.Epoch+1)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("claim returned after %v: it should have waited for the lock first", waited)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the zombie's transaction committed; it should have been terminated")
	}
}

package offsets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/stream"
)

// Config configures a Store. The zero value of each optional field means
// the default written next to it.
type Config struct {
	// Group is the consumer group whose rows the Store reads and writes.
	// Required.
	Group string
	// ClaimLockTimeout is how long a claim waits for another
	// transaction's lock on an offsets row before terminating its backend.
	// Default 10s.
	ClaimLockTimeout time.Duration
	// ClaimTimeout bounds a claim beyond its lock waits: a Claim fails
	// with an error wrapping context.DeadlineExceeded after
	// Config.ClaimDeadline, its connection closed, when Postgres stops
	// answering. 0: no bound but the caller's ctx.
	ClaimTimeout time.Duration
	// Logger receives a warning for every zombie a claim terminates.
	// Default: discard.
	Logger *slog.Logger
}

// ClaimDeadline is how long a Claim may take: up to maxClaimAttempts lock
// waits of ClaimLockTimeout (default 10s), each followed by the
// termination of the holder, and ClaimTimeout for the rest. 0 when
// ClaimTimeout is 0.
func (c Config) ClaimDeadline() time.Duration {
	if c.ClaimTimeout <= 0 {
		return 0
	}
	lock := c.ClaimLockTimeout
	if lock <= 0 {
		lock = defaultClaimLockTimeout
	}
	return maxClaimAttempts*lock + c.ClaimTimeout
}

// defaultClaimLockTimeout is Config.ClaimLockTimeout's default.
const defaultClaimLockTimeout = 10 * time.Second

// Store is one consumer group's rows of kafka2pg.offsets. Safe for
// concurrent use.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
}

// New returns a Store on pool. It does not touch the database.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if cfg.Group == "" {
		return nil, stream.FieldErrorf("offsets.Config.Group", "empty: name the consumer group the offsets are kept for")
	}
	if cfg.ClaimLockTimeout <= 0 {
		cfg.ClaimLockTimeout = defaultClaimLockTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{pool: pool, cfg: cfg, log: log}, nil
}

const claimSQL = `
INSERT INTO kafka2pg.offsets AS o (consumer_group, topic, partition)
SELECT $1, $2, p FROM unnest($3::integer[]) AS p
ON CONFLICT (consumer_group, topic, partition)
DO UPDATE SET epoch = o.epoch + 1, updated_at = now()
RETURNING partition, coalesce(next_offset, -1), epoch, leader_epoch`

// terminateHoldersSQL finds the backends whose open transaction holds an
// offsets row (its xid is the row's xmax) and terminates them.
const terminateHoldersSQL = `
SELECT l.pid, o.partition, pg_terminate_backend(l.pid)
FROM kafka2pg.offsets o
JOIN pg_locks l ON l.locktype = 'transactionid' AND l.transactionid = o.xmax
                AND l.mode = 'ExclusiveLock' AND l.granted
WHERE o.consumer_group = $1 AND o.topic = $2 AND o.partition = ANY($3::integer[])
  AND l.pid <> pg_backend_pid()`

// maxClaimAttempts bounds how often a claim terminates lock holders and tries
// again before giving up (the caller retries later with backoff).
const maxClaimAttempts = 3

// Claim fences every earlier writer of the partitions of topic by bumping
// their epochs, and returns their durable positions. Rows are created when
// missing. If an open transaction holds a row for longer than
// ClaimLockTimeout, its backend is terminated and the claim tries again.
// With ClaimTimeout, the whole claim has a deadline (Config.ClaimDeadline);
// a transaction it cancels closes its connection (pgx does on a cancel).
func (s *Store) Claim(ctx context.Context, topic string, partitions []int32) (map[int32]stream.Position, error) {
	if d := s.cfg.ClaimDeadline(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var lastErr error
	for range maxClaimAttempts {
		pos, err := s.claimOnce(ctx, topic, partitions)
		if err == nil {
			return pos, nil
		}
		lastErr = err
		if !lockTimeout(err) {
			return nil, err
		}
		if err := s.terminateHolders(ctx, topic, partitions); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("claim %s %v: the offsets rows stayed locked: %w", topic, partitions, lastErr)
}

func (s *Store) claimOnce(ctx context.Context, topic string, partitions []int32) (map[int32]stream.Position, error) {
	out := make(map[int32]stream.Position, len(partitions))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		timeout := fmt.Sprintf("%dms", s.cfg.ClaimLockTimeout.Milliseconds())
		if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", timeout); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, claimSQL, s.cfg.Group, topic, partitions)
		if err != nil {
			return err
		}
		var p int32
		var pos stream.Position
		_, err = pgx.ForEachRow(rows, []any{&p, &pos.NextOffset, &pos.Epoch, &pos.LeaderEpoch}, func() error {
			out[p] = pos
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim %s %v: %w", topic, partitions, err)
	}
	return out, nil
}

func (s *Store) terminateHolders(ctx context.Context, topic string, partitions []int32) error {
	rows, err := s.pool.Query(ctx, terminateHoldersSQL, s.cfg.Group, topic, partitions)
	if err != nil {
		return fmt.Errorf("claim %s %v: find the transaction holding the offsets rows: %w", topic, partitions, err)
	}
	var pid, partition int32
	var ok bool
	_, err = pgx.ForEachRow(rows, []any{&pid, &partition, &ok}, func() error {
		s.log.Warn("terminated the backend of a writer that held a claimed partition past the claim lock timeout (a zombie)",
			"topic", topic, "partition", partition, "pid", pid, "terminated", ok, "claim_lock_timeout", s.cfg.ClaimLockTimeout)
		return nil
	})
	if err != nil {
		return fmt.Errorf("claim %s %v: terminate the transaction holding the offsets rows: %w", topic, partitions, err)
	}
	// Give the terminated backend a moment to release its locks.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(50 * time.Millisecond):
	}
	return nil
}

// lockTimeout is SQLSTATE 55P03 lock_not_available.
func lockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// Positions returns what is stored for the partitions of topic, so that
// an owner can notice, while it has nothing to write, that it was fenced
// (a newer epoch) or that its position moved (Postgres lost commits).
func (s *Store) Positions(ctx context.Context, topic string) (map[int32]stream.Position, error) {
	rows, err := s.pool.Query(ctx, `SELECT partition, epoch, coalesce(next_offset, -1), leader_epoch FROM kafka2pg.offsets
		WHERE consumer_group = $1 AND topic = $2`, s.cfg.Group, topic)
	if err != nil {
		return nil, fmt.Errorf("read the positions of %s: %w", topic, err)
	}
	out := map[int32]stream.Position{}
	var p int32
	var pos stream.Position
	if _, err := pgx.ForEachRow(rows, []any{&p, &pos.Epoch, &pos.NextOffset, &pos.LeaderEpoch}, func() error { out[p] = pos; return nil }); err != nil {
		return nil, fmt.Errorf("read the positions of %s: %w", topic, err)
	}
	return out, nil
}

package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The upsert paths (a COPY of new keys into the table, the staging table
// of the session, the statement that keeps the last operation per key in
// SQL for keys whose binary form does not tell them apart), each held to a
// fold of the records in offset order.

// keyType is a type of upsert key: its column type, the Go value of a
// Kafka key, and the key the fold compares (Postgres' equality).
type keyType struct {
	name   string
	column string // the key column's type
	value  func(key string) any
	canon  func(key string) string
	keys   []string // the keys the random batches draw from
	// same is two spellings of one key (the same twice when the type has
	// one spelling a value).
	same [2]string
}

var keyTypes = []keyType{
	{name: "bigint", column: "bigint", value: func(k string) any { n, _ := strconv.ParseInt(k, 10, 64); return n },
		canon: func(k string) string { return k }, keys: strings.Fields("-3 -1 0 1 2 3 5 8 13 21 34 55"), same: [2]string{"5", "5"}},
	{name: "text", column: "text", value: func(k string) any { return k },
		canon: func(k string) string { return k }, keys: strings.Fields("a b ab ba c é e z zz Z A 0"), same: [2]string{"é", "é"}},
	// 1, 1.0 and 01 are one numeric: the set may hold two operations of
	// one key, and the statement must keep the last.
	{name: "numeric", column: "numeric", value: func(k string) any { return k },
		canon: func(k string) string { f, _ := strconv.ParseFloat(k, 64); return strconv.FormatFloat(f, 'f', -1, 64) },
		keys:  strings.Fields("1 1.0 01 2 2.00 3 -1 -1.0 0 0.0 10 10.0"), same: [2]string{"1", "1.0"}},
	// A and a are one key under a nondeterministic collation.
	{name: "case-insensitive text", column: `text COLLATE "upsert_ci"`, value: func(k string) any { return k },
		canon: strings.ToLower, keys: strings.Fields("a A b B ab AB Ab c C z Z é"), same: [2]string{"A", "a"}},
}

// keyedMapper maps records keyed by the Kafka key to rows (id, val,
// kafka_offset) of a table keyed by id: the value is {"val": n}, or null
// (a tombstone).
type keyedMapper struct{ kt keyType }

func (m keyedMapper) Row(r *stream.Record, dst []any) ([]any, error) {
	var v struct {
		Val *int64 `json:"val"`
	}
	if err := json.Unmarshal(r.Value, &v); err != nil || v.Val == nil {
		return nil, &decode.DecodeError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Kind: decode.KindInvalidJSON, Err: errors.New("no val")}
	}
	return append(dst[:0], m.kt.value(string(r.Key)), *v.Val, r.Offset), nil
}
func (m keyedMapper) IsTombstone(r *stream.Record) bool { return r.Value == nil }
func (m keyedMapper) KeyRow(r *stream.Record) ([]any, error) {
	return []any{m.kt.value(string(r.Key))}, nil
}

func keyedTable(kt keyType) schema.Table {
	return schema.Table{Schema: "public", Name: "keyed", Columns: []schema.Column{
		{Name: "id", Type: kt.column, NotNull: true}, {Name: "val", Type: "bigint"}, {Name: "kafka_offset", Type: "bigint"},
	}, PrimaryKey: []string{"id"}}
}

// keyedWriter is a Writer of topic "keyed" into keyedTable(kt) on pool,
// with partitions 0..parts-1 claimed; it returns their epochs.
func keyedWriter(t *testing.T, pool *pgxpool.Pool, kt keyType, parts int) (*ingest.Writer, []int64) {
	return keyedWriterWith(t, pool, kt, parts, ingest.Config{})
}

// keyedWriterWith is keyedWriter with cfg (but its group and sinks).
func keyedWriterWith(t *testing.T, pool *pgxpool.Pool, kt keyType, parts int, cfg ingest.Config) (*ingest.Writer, []int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE COLLATION IF NOT EXISTS upsert_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`); err != nil {
		t.Fatal(err)
	}
	cfg.Group = "g"
	cfg.Sinks = map[string]ingest.Sink{"keyed": {Table: keyedTable(kt), Mapper: keyedMapper{kt},
		Upsert: &ingest.Upsert{Key: []string{"id"}, DeleteOnTombstone: true}}}
	w := readyWriter(t, pool, cfg)
	ids := make([]int32, parts)
	for p := range ids {
		ids[p] = int32(p)
	}
	pos, err := w.Claim(ctx, "keyed", ids)
	if err != nil {
		t.Fatal(err)
	}
	epochs := make([]int64, parts)
	for p := range epochs {
		epochs[p] = pos[int32(p)].Epoch
	}
	return w, epochs
}

// keyedOp is one record: an upsert of val, or a delete (del).
type keyedOp struct {
	key string
	val int64
	del bool
}

func keyedBatch(p int32, epoch, first int64, ops []keyedOp) *stream.Batch {
	b := &stream.Batch{Topic: "keyed", Partition: p, Epoch: epoch, PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + int64(len(ops))}
	for i, o := range ops {
		r := stream.Record{Topic: "keyed", Partition: p, Offset: first + int64(i), Key: []byte(o.key)}
		if !o.del {
			r.Value = fmt.Appendf(nil, `{"val":%d}`, o.val)
		}
		b.Records = append(b.Records, r)
	}
	return b
}

// fold is what a table holds once ops are applied one by one: by canonical
// key, the last upsert's val and offset, unless a delete came after it.
type fold map[string][2]int64

func (f fold) apply(kt keyType, first int64, ops []keyedOp) {
	for i, o := range ops {
		if o.del {
			delete(f, kt.canon(o.key))
		} else {
			f[kt.canon(o.key)] = [2]int64{o.val, first + int64(i)}
		}
	}
}

// keyedState reads keyedTable's rows as a fold.
func keyedState(t *testing.T, pool *pgxpool.Pool, kt keyType) fold {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id::text, val, kafka_offset FROM keyed`)
	if err != nil {
		t.Fatal(err)
	}
	got := fold{}
	for rows.Next() {
		var id string
		var v [2]int64
		if err := rows.Scan(&id, &v[0], &v[1]); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[kt.canon(id)]; dup {
			t.Fatalf("two rows of key %q", kt.canon(id))
		}
		got[kt.canon(id)] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// randomOps draws n operations on keys: a batch of every kind the paths
// tell apart (new keys only, updates, deletes, a key twice, a delete then
// an upsert of one key), by chance.
func randomOps(rng *rand.Rand, keys []string, n int, next *int64) []keyedOp {
	ops := make([]keyedOp, n)
	for i := range ops {
		*next++
		ops[i] = keyedOp{key: keys[rng.IntN(len(keys))], val: *next, del: rng.IntN(4) == 0}
	}
	return ops
}

// Every batch, whatever path writes it, leaves the table equal to the
// fold of all the records so far in offset order, for keys whose binary
// form tells them apart (bigint, text) and for keys it does not (numeric,
// a nondeterministic collation), where a batch may hold two spellings of
// one key.
func TestUpsertBatchesEqualTheFoldOfTheirRecords(t *testing.T) {
	t.Parallel()
	for _, kt := range keyTypes {
		t.Run(kt.name, func(t *testing.T) {
			ctx := context.Background()
			_, pool := pgtest.MigratedPool(t)
			w, epochs := keyedWriter(t, pool, kt, 1)
			rng := rand.New(rand.NewPCG(1, uint64(len(kt.name))))
			want := fold{}
			offset, val := int64(0), int64(0)
			// New keys in ascending order first (the COPY into the
			// table), then random batches of every size.
			sorted := slices.Clone(kt.keys[:4])
			slices.SortFunc(sorted, func(a, b string) int { return strings.Compare(kt.canon(a), kt.canon(b)) })
			batches := [][]keyedOp{{{key: sorted[0], val: 1}, {key: sorted[2], val: 2}}}
			// A key upserted in one spelling, then deleted in the
			// other, in one batch, and the other way round: the last
			// operation wins even when the spellings differ.
			a, b := kt.same[0], kt.same[1]
			batches = append(batches, []keyedOp{{key: a, val: 3}}, []keyedOp{{key: b, val: 4}, {key: a, del: true}},
				[]keyedOp{{key: a, val: 5}}, []keyedOp{{key: a, del: true}, {key: b, val: 6}})
			for range 40 {
				batches = append(batches, randomOps(rng, kt.keys, 1+rng.IntN(30), &val))
			}
			for i, ops := range batches {
				if err := w.Write(ctx, keyedBatch(0, epochs[0], offset, ops)); err != nil {
					t.Fatalf("batch %d %v: %v", i, ops, err)
				}
				want.apply(kt, offset, ops)
				offset += int64(len(ops))
				if got := keyedState(t, pool, kt); !mapsEqual(got, want) {
					t.Fatalf("after batch %d %v:\n got %v\nwant %v", i, ops, got, want)
				}
			}
			if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'keyed'`); n != offset {
				t.Errorf("next_offset = %d, want %d", n, offset)
			}
		})
	}
}

func mapsEqual(a, b fold) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// sqlLog records the statements a pool's connections run (a
// pgx.QueryTracer).
type sqlLog struct {
	mu   sync.Mutex
	sqls []string
}

func (l *sqlLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.sqls = append(l.sqls, d.SQL)
	l.mu.Unlock()
	return ctx
}
func (l *sqlLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements since the last take that start with one of
// prefixes, each cut to its prefix.
func (l *sqlLog) take(prefixes ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.sqls {
		for _, p := range prefixes {
			if strings.HasPrefix(s, p) {
				out = append(out, p)
			}
		}
	}
	l.sqls = nil
	return out
}

// A batch of new keys is COPYed into the table under a savepoint, without
// the staging table; one that meets an existing key is rolled back to the
// savepoint and staged, and the table's next batch skips the try. The
// staging table is created once in the session and is empty between
// batches; a session that replaces a lost connection creates its own.
func TestUpsertCopiesNewKeysIntoTheTableAndStagesTheRestInOneTablePerSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := &sqlLog{}
	pool, url := ingest.OnePool(t, log)
	kt := keyTypes[0]
	w, epochs := keyedWriter(t, pool, kt, 1)
	log.take()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	stages := func() (oids []uint32, size int64) {
		t.Helper()
		rows, err := admin.Query(ctx, `SELECT oid, pg_relation_size(oid) FROM pg_class WHERE relname LIKE 'kafka2pg\_stage\_%' AND relpersistence = 't'`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var oid uint32
			var n int64
			if err := rows.Scan(&oid, &n); err != nil {
				t.Fatal(err)
			}
			oids, size = append(oids, oid), size+n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return oids, size
	}
	want := fold{}
	offset := int64(0)
	write := func(ops ...keyedOp) {
		t.Helper()
		b := keyedBatch(0, epochs[0], offset, ops)
		for tries := 0; ; tries++ {
			err := w.Write(ctx, b)
			if err == nil {
				break
			}
			// The first write after the connection was lost fails, as
			// any write on a dead connection does; the reader claims
			// again and writes the batch again.
			if tries > 0 || !ingest.Retryable(err) {
				t.Fatalf("write at %d: %v", offset, err)
			}
			pos, err := w.Claim(ctx, "keyed", []int32{0})
			if err != nil {
				t.Fatal(err)
			}
			if pos[0].NextOffset != offset {
				t.Fatalf("after a failed write next_offset is %d, want %d", pos[0].NextOffset, offset)
			}
			epochs[0], b.Epoch = pos[0].Epoch, pos[0].Epoch
		}
		want.apply(kt, offset, ops)
		offset += int64(len(ops))
		if got := keyedState(t, pool, kt); !mapsEqual(got, want) {
			t.Fatalf("after the batch at %d: got %v, want %v", offset, got, want)
		}
	}
	// What each batch ran, by the statements' first words (the COPYs run
	// on pgconn, which the tracer does not see).
	direct := []string{"SAVEPOINT", "RELEASE"}
	refused := []string{"SAVEPOINT", "ROLLBACK", "CREATE TEMP TABLE", "INSERT"}
	staged := []string{"CREATE TEMP TABLE", "INSERT"}
	paths := []string{"SAVEPOINT", "RELEASE", "ROLLBACK", "CREATE TEMP TABLE", "INSERT", "WITH"}
	log.take()
	for i, step := range []struct {
		ops  []keyedOp
		want []string
	}{
		{[]keyedOp{{key: "1", val: 1}, {key: "2", val: 2}, {key: "3", val: 3}}, direct},
		{[]keyedOp{{key: "4", val: 4}, {key: "2", val: 5}}, refused}, // 2 exists
		{[]keyedOp{{key: "5", val: 6}, {key: "3", val: 7}, {key: "1", del: true}}, []string{ // skipped once
			"CREATE TEMP TABLE", "WITH"}},
		{[]keyedOp{{key: "6", val: 8}, {key: "7", val: 9}}, direct},
		{[]keyedOp{{key: "2", val: 10}}, refused},
		{[]keyedOp{{key: "3", val: 11}}, staged}, // skipped once
		{[]keyedOp{{key: "6", val: 12}}, refused},
		{[]keyedOp{{key: "7", val: 13}}, staged}, // skipped twice
		{[]keyedOp{{key: "9", val: 14}}, staged},
	} {
		write(step.ops...)
		if got := log.take(paths...); !slices.Equal(got, step.want) {
			t.Fatalf("batch %d %v ran %q, want %q", i, step.ops, got, step.want)
		}
		oids, size := stages()
		if i == 0 && len(oids) != 0 {
			t.Fatalf("new keys created staging tables %v", oids)
		}
		if i > 0 && (len(oids) != 1 || size != 0) {
			t.Fatalf("staging tables after batch %d: %v, %d bytes; want one, empty", i, oids, size)
		}
	}
	first, _ := stages()

	// The connection goes; its session's staging table with it.
	var ok bool
	if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, ingest.BackendPID(t, pool)).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate the pool's backend: %v %v", ok, err)
	}
	write(keyedOp{key: "7", val: 15}, keyedOp{key: "8", val: 16})
	write(keyedOp{key: "8", val: 17})
	// The old backend drops its temporary tables as it exits.
	for deadline := time.Now().Add(10 * time.Second); ; {
		after, _ := stages()
		if len(after) == 1 && after[0] != first[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("staging tables after the connection was replaced: %v, want one other than %v", after, first)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Postgres refusing a row of the COPY into the table, or of the staged
// statement, makes the batch go operation by operation: the refused
// records become dead letters, and the others are applied in order.
func TestUpsertRowsRefusedOnEitherPathAreDeadLettersAndTheRestApplies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.MigratedPool(t)
	kt := keyTypes[0]
	w, epochs := keyedWriter(t, pool, kt, 1)
	if _, err := pool.Exec(ctx, `ALTER TABLE keyed ADD CHECK (val >= 0)`); err != nil {
		t.Fatal(err)
	}
	tr := trace(w)
	want := fold{}
	offset := int64(0)
	for i, ops := range [][]keyedOp{
		{{key: "1", val: 1}, {key: "2", val: -2}, {key: "3", val: 3}},  // new keys: the COPY into the table is refused
		{{key: "1", val: 4}, {key: "3", val: -5}, {key: "4", val: 6}},  // existing keys: the staged statement is refused
		{{key: "3", val: -7}, {key: "3", val: 8}, {key: "4", val: -9}}, // the last of a key counts, and it is good
	} {
		res, err := tr.write(ctx, w, keyedBatch(0, epochs[0], offset, ops))
		if err != nil {
			t.Fatal(err)
		}
		var good []keyedOp
		bad := 0
		for _, o := range ops {
			if o.val < 0 {
				bad++
			} else {
				good = append(good, o)
			}
		}
		if i == 2 {
			// Isolated, the operations apply one by one: the refused
			// update of 4 leaves its row as it was, and 3 ends at 8.
			good = []keyedOp{{key: "3", val: 8}}
		}
		for j, o := range ops {
			if slices.Contains(good, o) {
				want.apply(kt, offset+int64(j), []keyedOp{o})
			}
		}
		if !res.Isolated || res.DeadLetters != bad {
			t.Errorf("batch %d: %+v, want it isolated with %d dead letters", i, res, bad)
		}
		offset += int64(len(ops))
		if got := keyedState(t, pool, kt); !mapsEqual(got, want) {
			t.Fatalf("after batch %d: got %v, want %v", i, got, want)
		}
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM kafka2pg.dead_letters WHERE error_kind = 'check_violation'`); n != 4 {
		t.Errorf("%d dead letters of kind check_violation, want 4", n)
	}
}

// Partitions of one table are written at once, each in its own
// transaction. With keys of their own, interleaved in the table's index,
// the table ends as the fold of each partition's records. With keys they
// share, their transactions may deadlock (Postgres aborts one, 40P01,
// which is retried as any failed write is: claim, write again); every key
// then holds the last operation of one of the partitions that touched it,
// never a row a partition deleted last while every other deleted it too,
// and every partition's next_offset is its end.
func TestUpsertConcurrentWritersOfOneTable(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared keys %t", shared), func(t *testing.T) {
			const parts, batches = 4, 12
			ctx := context.Background()
			_, pool := pgtest.MigratedPool(t)
			kt := keyTypes[0]
			w, epochs := keyedWriter(t, pool, kt, parts)
			folds := make([]fold, parts)
			lastOp := make([]map[string]keyedOp, parts)
			ends := make([]int64, parts)
			var retries sync.Map
			var wg sync.WaitGroup
			for p := range parts {
				folds[p], lastOp[p] = fold{}, map[string]keyedOp{}
				var keys []string
				for k := range 40 {
					if shared || k%parts == p {
						keys = append(keys, strconv.Itoa(k))
					}
				}
				rng := rand.New(rand.NewPCG(uint64(p), 7))
				ops := make([][]keyedOp, batches)
				val := int64(p) * 1_000_000
				for i := range ops {
					ops[i] = randomOps(rng, keys, 1+rng.IntN(60), &val)
					if shared && i%2 == 1 {
						// Keys in the other direction from partition to
						// partition, deletes among them.
						slices.Reverse(ops[i])
					}
				}
				wg.Go(func() {
					offset, epoch := int64(0), epochs[p]
					for _, batchOps := range ops {
						for {
							err := w.Write(ctx, keyedBatch(int32(p), epoch, offset, batchOps))
							if err == nil {
								break
							}
							// Deadlocks, and waits for the locks of the other
							// writers' keys past the write's deadline on a
							// busy machine: the reader claims again and goes
							// on from the durable position, and so does this.
							var pgErr *pgconn.PgError
							var late *ingest.DeadlineError
							code := "the write's deadline"
							switch {
							case errors.As(err, &late):
							case ingest.Retryable(err) && errors.As(err, &pgErr):
								code = "SQLSTATE " + pgErr.Code
							default:
								t.Errorf("partition %d at %d: %v", p, offset, err)
								return
							}
							n, _ := retries.LoadOrStore(code, new(int))
							*n.(*int)++
							pos, err := w.Claim(ctx, "keyed", []int32{int32(p)})
							if err != nil {
								t.Error(err)
								return
							}
							epoch = pos[int32(p)].Epoch
							got := pos[int32(p)].NextOffset
							if late != nil && late.Step == ingest.StepCommit && got == offset+int64(len(batchOps)) {
								break // committed: its COMMIT answered past the deadline
							}
							// Nothing was committed: the stored position is
							// still the batch's start (none at 0).
							if got != offset && (offset != 0 || got >= 0) {
								t.Errorf("partition %d: next_offset %d after a failed write at %d (%v)", p, got, offset, late)
								return
							}
						}
						folds[p].apply(kt, offset, batchOps)
						for _, o := range batchOps {
							lastOp[p][o.key] = o
						}
						offset += int64(len(batchOps))
					}
					ends[p] = offset
				})
			}
			wg.Wait()
			retries.Range(func(code, n any) bool {
				t.Logf("retried %d writes after %s", *n.(*int), code)
				return true
			})
			got := keyedState(t, pool, kt)
			if !shared {
				want := fold{}
				for _, f := range folds {
					for k, v := range f {
						want[k] = v
					}
				}
				if !mapsEqual(got, want) {
					t.Fatalf("got %v\nwant %v", got, want)
				}
			}
			for k := range 40 {
				key := strconv.Itoa(k)
				row, present := got[key]
				allDeleted, allUpserted, matches := true, true, false
				for p := range parts {
					o, ok := lastOp[p][key]
					if !ok {
						continue
					}
					allDeleted, allUpserted = allDeleted && o.del, allUpserted && !o.del
					if v, ok := folds[p][key]; ok && v == row {
						matches = true
					}
				}
				switch {
				case present && !matches:
					t.Errorf("key %s holds %v, the last upsert of no partition", key, row)
				case present && allDeleted:
					t.Errorf("key %s holds %v though every partition that touched it deleted it last", key, row)
				case !present && allUpserted && len(lastOpsOf(lastOp, key)) > 0:
					t.Errorf("key %s is missing though every partition that touched it upserted it last", key)
				}
			}
			for p := range parts {
				if n := queryInt(t, pool, `SELECT coalesce(next_offset, -1) FROM kafka2pg.offsets WHERE topic = 'keyed' AND partition = $1`, p); n != ends[p] {
					t.Errorf("partition %d: next_offset %d, want %d", p, n, ends[p])
				}
			}
		})
	}
}

// lastOpsOf is the last operations on key of the partitions that touched
// it.
func lastOpsOf(lastOp []map[string]keyedOp, key string) []keyedOp {
	var out []keyedOp
	for _, m := range lastOp {
		if o, ok := m[key]; ok {
			out = append(out, o)
		}
	}
	return out
}

// With OnError "stop", a record the mapping refuses, or a row Postgres
// refuses on either path, stops the partition there: the operations
// before it are committed, next_offset is its offset, and nothing after
// it is applied.
func TestUpsertStopsAtTheFirstBadRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.MigratedPool(t)
	kt := keyTypes[0]
	w, epochs := keyedWriterWith(t, pool, kt, 1, ingest.Config{OnError: ingest.OnErrorStop})
	if _, err := pool.Exec(ctx, `ALTER TABLE keyed ADD CHECK (val <> 13)`); err != nil {
		t.Fatal(err)
	}
	want := fold{}
	offset := int64(0)
	for i, c := range []struct {
		ops []keyedOp
		bad int // the index of the record that stops
		raw string
	}{
		{ops: []keyedOp{{key: "1", val: 1}, {key: "2", val: 2}, {key: "3"}, {key: "4", val: 4}}, bad: 2, raw: `not json`},
		{ops: []keyedOp{{key: "5", val: 5}, {key: "6", val: 13}, {key: "7", val: 7}}, bad: 1},                     // new keys: the direct COPY
		{ops: []keyedOp{{key: "6", val: 6}, {key: "1", val: 8}, {key: "2", val: 13}, {key: "1", val: 9}}, bad: 2}, // staged
	} {
		b := keyedBatch(0, epochs[0], offset, c.ops)
		if c.raw != "" {
			b.Records[c.bad].Value = []byte(c.raw)
		}
		err := w.Write(ctx, b)
		var stop *stream.StopError
		if !errors.As(err, &stop) || stop.Offset != offset+int64(c.bad) {
			t.Fatalf("batch %d: %v, want a stop at offset %d", i, err, offset+int64(c.bad))
		}
		want.apply(kt, offset, c.ops[:c.bad])
		offset += int64(c.bad)
		if got := keyedState(t, pool, kt); !mapsEqual(got, want) {
			t.Fatalf("after batch %d: got %v, want %v", i, got, want)
		}
		if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'keyed'`); n != offset {
			t.Fatalf("after batch %d: next_offset %d, want %d", i, n, offset)
		}
		pos, err := w.Claim(ctx, "keyed", []int32{0})
		if err != nil {
			t.Fatal(err)
		}
		epochs[0] = pos[0].Epoch
		offset++ // past the bad record, as an offsets reset would
		if _, err := pool.Exec(ctx, `UPDATE kafka2pg.offsets SET next_offset = $1 WHERE topic = 'keyed'`, offset); err != nil {
			t.Fatal(err)
		}
	}
}

package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// accountsMapper maps {"name":..,"balance":..} values keyed by the Kafka key
// (the account id) to accounts(id, name, balance): just enough of a typed
// mapping to drive the upsert path.
type accountsMapper struct{}

var accounts = schema.Table{Schema: "public", Name: "accounts", Columns: []schema.Column{
	{Name: "id", Type: "text", NotNull: true}, {Name: "name", Type: "text"}, {Name: "balance", Type: "bigint"},
}, PrimaryKey: []string{"id"}}

func (accountsMapper) Row(r *stream.Record, dst []any) ([]any, error) {
	var v struct {
		Name    *string `json:"name"`
		Balance *int64  `json:"balance"`
	}
	if r.Value == nil || json.Unmarshal(r.Value, &v) != nil {
		return nil, &decode.DecodeError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Kind: decode.KindInvalidJSON, Err: errors.New("bad account")}
	}
	return append(dst[:0], string(r.Key), v.Name, v.Balance), nil
}
func (accountsMapper) IsTombstone(r *stream.Record) bool { return r.Value == nil }
func (accountsMapper) KeyRow(r *stream.Record) ([]any, error) {
	if r.Key == nil {
		return nil, &decode.DecodeError{Topic: r.Topic, Offset: r.Offset, Kind: "missing_key", Err: errors.New("a tombstone without a key")}
	}
	return []any{string(r.Key)}, nil
}

// upsertWriter is a writer of topic accounts into accounts by upsert,
// partition 0 claimed at epoch.
func upsertWriter(t *testing.T, cfg ingest.Config) (w *ingest.Writer, pool *pgxpool.Pool, epoch int64) {
	t.Helper()
	_, pool = pgtest.MigratedPool(t)
	cfg.Group = "g"
	cfg.Sinks = map[string]ingest.Sink{"accounts": {Table: accounts, Mapper: accountsMapper{}, Upsert: &ingest.Upsert{Key: []string{"id"}, DeleteOnTombstone: true}}}
	w, epoch = claimed(t, pool, cfg, "accounts")
	return w, pool, epoch
}

type op struct {
	key, value string // value "" is a tombstone
}

func accountBatch(epoch, first int64, ops ...op) *stream.Batch {
	b := &stream.Batch{Topic: "accounts", Epoch: epoch, PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + int64(len(ops))}
	for i, o := range ops {
		r := stream.Record{Topic: "accounts", Offset: first + int64(i), Key: []byte(o.key)}
		if o.value != "" {
			r.Value = []byte(o.value)
		}
		b.Records = append(b.Records, r)
	}
	return b
}

func tableState(t *testing.T, pool *pgxpool.Pool) string {
	return rowsOf(t, pool, "accounts", "name", "balance")
}

func TestUpsertKeepsTheLastRecordPerKeyAndDeletesOnTombstones(t *testing.T) {
	t.Parallel()
	w, pool, e := upsertWriter(t, ingest.Config{})
	ctx := context.Background()
	if err := w.Write(ctx, accountBatch(e, 0,
		op{"a", `{"name":"Ann","balance":10}`},
		op{"b", `{"name":"Bob","balance":5}`},
		op{"a", `{"name":"Ann","balance":12}`}, // later wins within the batch
		op{"c", `{"name":"Cy","balance":1}`},
		op{"c", ""}, // tombstone after an upsert in the same batch: gone
		op{"d", ""}, // tombstone of a key that never existed: nothing
	)); err != nil {
		t.Fatal(err)
	}
	if got := tableState(t, pool); got != "a=Ann:12 b=Bob:5" {
		t.Fatalf("after batch 1: %q", got)
	}
	if err := w.Write(ctx, accountBatch(e, 6,
		op{"b", ""},                          // delete
		op{"b", `{"name":"Bo","balance":7}`}, // and back, later: exists
		op{"a", `{"name":null,"balance":null}`},
	)); err != nil {
		t.Fatal(err)
	}
	if got := tableState(t, pool); got != "a=NULL:NULL b=Bo:7" {
		t.Fatalf("after batch 2: %q", got)
	}
	if n := queryInt(t, pool, `SELECT next_offset FROM kafka2pg.offsets WHERE topic = 'accounts'`); n != 9 {
		t.Errorf("next_offset = %d, want 9", n)
	}
}

// refusingAccounts is an upsert writer of accounts, a table that refuses a
// negative balance, with partition 0 claimed at epoch.
func refusingAccounts(t *testing.T) (w *ingest.Writer, pool *pgxpool.Pool, epoch int64) {
	t.Helper()
	w, pool, epoch = upsertWriter(t, ingest.Config{})
	if _, err := pool.Exec(context.Background(), `ALTER TABLE accounts ADD CHECK (balance >= 0)`); err != nil {
		t.Fatal(err)
	}
	return w, pool, epoch
}

func TestUpsertRowsPostgresRefusesAreAppliedInOrderAroundThem(t *testing.T) {
	t.Parallel()
	w, pool, epoch := refusingAccounts(t)
	ctx := context.Background()
	res, err := trace(w).write(ctx, w, accountBatch(epoch, 0,
		op{"a", `{"name":"Ann","balance":10}`},
		op{"a", `{"name":"Ann","balance":-5}`}, // refused: the row keeps the previous good version
		op{"b", `{"name":"Bob","balance":3}`},
		op{"c", `not json`},
	))
	if err != nil {
		t.Fatal(err)
	}
	if got := tableState(t, pool); got != "a=Ann:10 b=Bob:3" {
		t.Errorf("table = %q, want the good operations applied in order", got)
	}
	if got := deadLetterKinds(t, pool); got[1] != "check_violation" || got[3] != decode.KindInvalidJSON || len(got) != 2 {
		t.Errorf("dead letters = %v", got)
	}
	if !res.Isolated || res.DeadLetters != 2 {
		t.Errorf("result = %+v", res)
	}
}

func TestUpsertDeadLettersAnUnreadableRecordAsTheFastPathDoesWhenItGoesOneByOne(t *testing.T) {
	t.Parallel()
	w, pool, epoch := refusingAccounts(t)
	ctx := context.Background()
	b := accountBatch(epoch, 0,
		op{"a", `{"name":"Ann","balance":10}`},
		op{"b", `{"name":"Bob","balance":-5}`}, // refused: the batch goes operation by operation
		op{"c", ""},
	)
	// Unreadable: no key, no value, so it looks like a tombstone; it must
	// not reach the mapper's KeyRow on either path.
	b.Records[2] = stream.Record{Topic: "accounts", Offset: 2, Unreadable: errors.New("the batch was over the fetch limit")}
	res, err := trace(w).write(ctx, w, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := deadLetterKinds(t, pool); got[1] != "check_violation" || got[2] != ingest.KindBatchTooLarge || len(got) != 2 {
		t.Errorf("dead letters = %v, want offset 1 check_violation, offset 2 %s", got, ingest.KindBatchTooLarge)
	}
	if !res.Isolated {
		t.Errorf("result = %+v, want the batch applied one by one", res)
	}
	if got := tableState(t, pool); got != "a=Ann:10" {
		t.Errorf("table = %q", got)
	}
}

func TestUpsertNeedsAUniqueIndexOnTheKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.MigratedPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id text, name text, balance bigint)`); err != nil {
		t.Fatal(err)
	}
	w, err := ingest.New(pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"accounts": {Table: accounts, Mapper: accountsMapper{},
		Upsert: &ingest.Upsert{Key: []string{"id"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	err = w.EnsureTables(ctx, true)
	if err == nil || !errorContains(err, "unique index", `"id"`) {
		t.Fatalf("EnsureTables = %v, want an error asking for a unique index on id", err)
	}
}

func errorContains(err error, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			return false
		}
	}
	return true
}

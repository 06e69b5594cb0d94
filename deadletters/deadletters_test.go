package deadletters_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// letter is a letter of group g for offset o of topic's partition p.
func letter(topic string, p int32, o int64, kind string) deadletters.Letter {
	return deadletters.Letter{Group: "g", Table: `"public"."` + topic + `"`, Kind: kind, Message: "refused: " + kind,
		Record: stream.Record{Topic: topic, Partition: p, Offset: o, Timestamp: time.UnixMilli(1_700_000_000_000 + o).UTC(),
			Key: []byte("k"), Value: []byte(`{"n":1}`)}}
}

// insert files letters in a transaction of their own.
func insert(t *testing.T, pool *pgxpool.Pool, letters ...deadletters.Letter) {
	t.Helper()
	if err := pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error { return deadletters.Insert(t.Context(), tx, letters) }); err != nil {
		t.Fatalf("insert %d letters: %v", len(letters), err)
	}
}

// offsetsOf lists what f selects and returns the letters' offsets.
func offsetsOf(t *testing.T, pool *pgxpool.Pool, f deadletters.Filter) []int64 {
	t.Helper()
	list, err := deadletters.List(t.Context(), pool, f, 0)
	if err != nil {
		t.Fatalf("list %+v: %v", f, err)
	}
	var out []int64
	for _, l := range list {
		out = append(out, l.Record.Offset)
	}
	return out
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM kafka2pg.dead_letters`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestInsertWritesInTheCallersTransactionOnly(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	ctx := t.Context()
	l := letter("orders", 2, 7, "check_violation")
	l.Record.Headers = []stream.Header{{Key: "trace", Value: []byte{1, 2}}, {Key: "nil"}}
	rollback := errors.New("the batch failed")
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := deadletters.Insert(ctx, tx, []deadletters.Letter{l}); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) || count(t, pool) != 0 {
		t.Fatalf("a rolled-back batch: %v, %d letters; want none", err, count(t, pool))
	}
	insert(t, pool, l)
	list, err := deadletters.List(ctx, pool, deadletters.Filter{}, 0)
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %+v, %v; want the one letter", list, err)
	}
	got := list[0]
	if got.ID == 0 || got.Group != "g" || got.Table != l.Table || got.Kind != l.Kind || got.Message != l.Message || got.CreatedAt.IsZero() ||
		got.Record.Topic != "orders" || got.Record.Partition != 2 || got.Record.Offset != 7 || !got.Record.Timestamp.Equal(l.Record.Timestamp) ||
		string(got.Record.Key) != "k" || string(got.Record.Value) != `{"n":1}` || len(got.Record.Headers) != 2 {
		t.Errorf("List = %+v, want %+v", got, l)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		page, err := deadletters.Oldest(ctx, tx, deadletters.Filter{}, 0, 10, false)
		if err != nil {
			return err
		}
		if len(page) != 1 || len(page[0].Record.Headers) != 2 || string(page[0].Record.Headers[0].Value) != "\x01\x02" ||
			page[0].Record.Headers[1].Key != "nil" || page[0].Record.Headers[1].Value != nil {
			t.Errorf("Oldest = %+v, want the letter with its headers as sent", page)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return deadletters.Insert(ctx, tx, nil) }); err != nil {
		t.Errorf("Insert of no letters: %v", err)
	}
}

// On a LATIN1 database (client_encoding UTF8, as kafka2pg connects), a
// letter's message and headers quoting a character LATIN1 lacks are
// stored in ASCII, by Insert and by Settle: Postgres would refuse them
// (SQLSTATE 22P05).
func TestTextALatin1DatabaseCannotHoldIsStoredInASCII(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := pgtest.MigratedPoolWithEncoding(t, "LATIN1")
	l := letter("orders", 0, 1, "invalid_json")
	l.Message = `invalid character '中'`
	l.Record.Headers = []stream.Header{{Key: "clé", Value: []byte("中")}}
	insert(t, pool, l)
	check := func(when, want string) {
		t.Helper()
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			page, err := deadletters.Oldest(ctx, tx, deadletters.Filter{}, 0, 1, true)
			if err != nil {
				return err
			}
			if len(page) != 1 || !strings.Contains(page[0].Message, want) || len(page[0].Record.Headers) != 1 ||
				page[0].Record.Headers[0].Key != "clé" || string(page[0].Record.Headers[0].Value) != "中" {
				t.Errorf("%s: %+v; want %s in the message and the headers as sent", when, page, want)
			}
			if when == "inserted" {
				page[0].Message = "still refused: 中文"
				return deadletters.Settle(ctx, tx, nil, page)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	check("inserted", `\u4E2D`)
	check("settled", `\u4E2D\u6587`)
}

func TestListSelectsByEveryFilterNewestFirst(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	other := letter("orders", 0, 4, "check_violation")
	other.Group = "other"
	insert(t, pool, letter("orders", 0, 1, "check_violation"), letter("orders", 1, 2, "invalid_json"), letter("clicks", 0, 3, "check_violation"), other)
	var ids []int64
	all, err := deadletters.List(t.Context(), pool, deadletters.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range all {
		ids = append(ids, l.ID)
	}
	for _, c := range []struct {
		name  string
		f     deadletters.Filter
		limit int
		want  []int64 // offsets
	}{
		{"no filter: all, newest first", deadletters.Filter{}, 0, []int64{4, 3, 2, 1}},
		{"a limit keeps the newest", deadletters.Filter{}, 2, nil},
		{"a group", deadletters.Filter{Group: "g"}, 0, []int64{3, 2, 1}},
		{"topics", deadletters.Filter{Group: "g", Topics: []string{"orders"}}, 0, []int64{2, 1}},
		{"a table", deadletters.Filter{Table: `"public"."clicks"`}, 0, []int64{3}},
		{"kinds", deadletters.Filter{Kinds: []string{"invalid_json"}}, 0, []int64{2}},
		{"ids", deadletters.Filter{IDs: []int64{ids[3], ids[1]}}, 0, []int64{3, 1}},
		{"since later than all", deadletters.Filter{Since: time.Now().Add(time.Hour)}, 0, nil},
	} {
		list, err := deadletters.List(t.Context(), pool, c.f, c.limit)
		var got []int64
		for _, l := range list {
			got = append(got, l.Record.Offset)
		}
		want := c.want
		if c.limit == 2 {
			want = []int64{4, 3}
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: offsets %v, %v; want %v", c.name, got, err, want)
		}
	}
}

func TestTablesGivesTheTargetTablesOfTheSelectedLettersByTopic(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	none := letter("orders", 0, 3, "invalid_json")
	none.Table = ""
	typed := letter("orders", 0, 4, "check_violation")
	typed.Table = `"sales"."orders"`
	insert(t, pool, letter("orders", 0, 1, "check_violation"), letter("orders", 0, 2, "check_violation"), none, typed, letter("clicks", 0, 1, "invalid_json"))
	got, err := deadletters.Tables(t.Context(), pool, deadletters.Filter{Kinds: []string{"check_violation", "invalid_json"}, Topics: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	tables := got["orders"]
	slices.Sort(tables)
	if len(got) != 1 || !slices.Equal(tables, []string{"", `"public"."orders"`, `"sales"."orders"`}) {
		t.Errorf("Tables = %v; want orders' three tables (one unrecorded), each once", got)
	}
}

func TestOldestPagesInIDOrderAndSkipsWhatAnotherReplayHolds(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	ctx := t.Context()
	insert(t, pool, letter("orders", 0, 1, "k"), letter("orders", 0, 2, "k"), letter("orders", 0, 3, "k"), letter("orders", 0, 4, "k"))
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	held, err := deadletters.Oldest(ctx, holder, deadletters.Filter{}, 0, 2, true)
	if err != nil || len(held) != 2 || held[0].Record.Offset != 1 || held[1].Record.Offset != 2 {
		t.Fatalf("the first replay's page: %+v, %v; want offsets 1 and 2", held, err)
	}
	offsets := func(lock bool, after int64) []int64 {
		t.Helper()
		var out []int64
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			page, err := deadletters.Oldest(ctx, tx, deadletters.Filter{}, after, 10, lock)
			for _, l := range page {
				out = append(out, l.Record.Offset)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := offsets(true, 0); !slices.Equal(got, []int64{3, 4}) {
		t.Errorf("a second replay reads %v, want 3 and 4: 1 and 2 are held", got)
	}
	if got := offsets(false, 0); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Errorf("a dry run reads %v, want all four: it takes no locks", got)
	}
	if got := offsets(false, held[1].ID); !slices.Equal(got, []int64{3, 4}) {
		t.Errorf("the page after id %d: %v, want 3 and 4", held[1].ID, got)
	}
}

func TestSettleDeletesTheReplayedAndKeepsTheRefusedWithTheirNewReason(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	ctx := t.Context()
	insert(t, pool, letter("orders", 0, 1, "check_violation"), letter("orders", 0, 2, "check_violation"), letter("orders", 0, 3, "check_violation"))
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		page, err := deadletters.Oldest(ctx, tx, deadletters.Filter{}, 0, 10, true)
		if err != nil {
			return err
		}
		refused := page[1]
		refused.Kind, refused.Message = "not_null_violation", "null value in column"
		return deadletters.Settle(ctx, tx, []int64{page[0].ID, page[2].ID}, []deadletters.Letter{refused})
	})
	if err != nil {
		t.Fatal(err)
	}
	list, err := deadletters.List(ctx, pool, deadletters.Filter{}, 0)
	if err != nil || len(list) != 1 || list[0].Record.Offset != 2 || list[0].Kind != "not_null_violation" || list[0].Message != "null value in column" {
		t.Errorf("after Settle: %+v, %v; want offset 2 alone, with its new kind and reason", list, err)
	}
	// An id that is gone is a bug of the caller: nothing is settled.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return deadletters.Settle(ctx, tx, []int64{list[0].ID, list[0].ID + 1000}, nil)
	})
	if err == nil || !strings.Contains(err.Error(), "some were gone") || count(t, pool) != 1 {
		t.Errorf("Settle of a missing id: %v, %d letters; want an error and the letter kept", err, count(t, pool))
	}
}

func TestCountFromAndDeleteFromTakeThePartitionsLettersAtOrPastAnOffset(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	ctx := t.Context()
	other := letter("orders", 0, 9, "k")
	other.Group = "other"
	insert(t, pool, letter("orders", 0, 6, "k"), letter("orders", 0, 7, "k"), letter("orders", 0, 9, "k"),
		letter("orders", 1, 9, "k"), letter("clicks", 0, 9, "k"), other)
	n, err := deadletters.CountFrom(ctx, pool, "g", "orders", 0, 7)
	if err != nil || n != 2 {
		t.Fatalf("CountFrom = %d, %v; want 2 (offsets 7 and 9 of g's orders/0)", n, err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		n, err = deadletters.DeleteFrom(ctx, tx, "g", "orders", 0, 7)
		return err
	}); err != nil || n != 2 {
		t.Fatalf("DeleteFrom = %d, %v; want 2", n, err)
	}
	if got := offsetsOf(t, pool, deadletters.Filter{Group: "g", Topics: []string{"orders"}}); !slices.Equal(got, []int64{9, 6}) {
		t.Errorf("g's orders letters left at offsets %v, want partition 1's 9 and partition 0's 6", got)
	}
	if count(t, pool) != 4 {
		t.Errorf("%d letters left, want 4", count(t, pool))
	}
}

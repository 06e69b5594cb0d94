package deadletters_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/stream"
)

// A writer files a record Postgres refused in the transaction of its
// batch; an operator lists it later.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/shop")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	rec := stream.Record{Topic: "orders", Partition: 0, Offset: 41, Timestamp: time.Now(), Value: []byte(`{"qty":-1}`)}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// ... offsets.Store.Advance and the batch's good rows, then:
		return deadletters.Insert(ctx, tx, []deadletters.Letter{{Group: "orders-sink", Record: rec,
			Table: `"public"."orders"`, Kind: "check_violation", Message: `new row violates check constraint "qty_positive"`}})
	})
	if err != nil {
		log.Fatal(err)
	}
	letters, err := deadletters.List(ctx, pool, deadletters.Filter{Group: "orders-sink", Topics: []string{"orders"}}, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range letters {
		fmt.Printf("%s/%d@%d %s: %s\n", l.Record.Topic, l.Record.Partition, l.Record.Offset, l.Kind, l.Message)
	}
}

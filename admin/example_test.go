package admin_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// An operator checks a bridge's tables, then moves its group back to the
// start of the topic, deleting what the records read again will write.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/shop")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	set, err := sinks.Config{Sinks: []sinks.Sink{{Topic: "orders"}}}.Build(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range admin.CheckPostgres(ctx, pool, admin.PostgresCheck{Group: "orders-sink", Migrate: true, CreateTables: true}, set) {
		fmt.Println(f.Level, f.Message)
	}

	k := admin.Kafka{Brokers: []string{"localhost:9092"}}
	plan, err := admin.PlanReset(ctx, pool, k, admin.ResetRequest{Group: "orders-sink", Topics: []string{"orders"},
		To: admin.Target{Kind: admin.Earliest}, DeleteRows: true, Sinks: set})
	if err != nil {
		log.Fatal(err)
	}
	if plan.Refused() > 0 {
		log.Fatal("moving back would write rows twice")
	}
	deleted, err := admin.ApplyReset(ctx, pool, plan)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d partition(s) moved, %d row(s) deleted\n", len(plan.Steps), deleted.Rows)
	if err := admin.MirrorReset(ctx, k, plan); err != nil {
		fmt.Println("Kafka's group offsets follow when the bridges claim again:", err)
	}
}

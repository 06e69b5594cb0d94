package sinks_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// A program that embeds the bridge with a YAML sink config: the topic
// orders upserted by id into a typed table public.orders, until the
// bridge has caught up. The brokers and the database come from the
// environment (TestMain sets them to a kfake cluster and a test
// database).
func Example() {
	var cfg sinks.Config
	if err := yaml.Unmarshal([]byte(`sinks:
  - {topic: orders, mode: upsert, key: [id],
     columns: [{name: id, type: bigint, not_null: true}, {name: total, type: numeric}]}`), &cfg); err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	set, err := cfg.Build(ctx, nil) // no avro, protobuf or json_schema sink: no registry
	if err != nil {
		fmt.Println(err)
		return
	}
	topics, regex := cfg.Topics()
	b, err := bridge.New(bridge.Config{
		Kafka: reader.Config{Brokers: strings.Split(os.Getenv("KAFKA_BROKERS"), ","), Group: "orders-pg",
			Topics: topics, TopicsAreRegex: regex},
		Sinks: set, PostgresURL: os.Getenv("DATABASE_URL"), UntilCaughtUp: true,
	}, nil, nil)
	if err == nil {
		err = b.Run(ctx)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.Stats().Rows, "rows written")
	// Output: 3 rows written
}

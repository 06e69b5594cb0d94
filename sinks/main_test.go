package sinks_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// TestMain gives Example what a program's environment would: a kfake
// cluster holding three orders (KAFKA_BROKERS) and a database of its own
// (DATABASE_URL). Without a PostgreSQL, Example is skipped with a note
// naming pgtest.EnvURL, or, under CI=true, the run fails.
func TestMain(m *testing.M) {
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, drop, err := pgtest.Database(ctx)
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "sinks: no PostgreSQL, and CI=true does not allow skipping Example: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "sinks: Example skipped: no PostgreSQL: set %s (%v)\n", pgtest.EnvURL, err)
		if f := flag.Lookup("test.run"); f.Value.String() == "" {
			_ = f.Value.Set("^Test")
		}
		os.Exit(m.Run())
	}
	code := runWithKafka(ctx, m, url)
	if err := drop(context.WithoutCancel(ctx)); err != nil {
		fmt.Fprintf(os.Stderr, "sinks: %v\n", err)
	}
	os.Exit(code)
}

func runWithKafka(ctx context.Context, m *testing.M, url string) int {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "sinks: start kfake: %v\n", err)
		return 1
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		fmt.Fprintf(os.Stderr, "sinks: %v\n", err)
		return 1
	}
	defer cl.Close()
	for i, total := range []string{"9.50", "12", "0.99"} {
		v := fmt.Sprintf(`{"id": %d, "total": %s}`, i+1, total)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(v)}).FirstErr(); err != nil {
			fmt.Fprintf(os.Stderr, "sinks: produce: %v\n", err)
			return 1
		}
	}
	os.Setenv("KAFKA_BROKERS", strings.Join(c.ListenAddrs(), ","))
	os.Setenv("DATABASE_URL", url)
	return m.Run()
}

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/demo"
	"github.com/kafka2pg/kafka2pg/internal/redact"
)

func defineDemoFlags(fs *pflag.FlagSet, c *demo.Config) {
	def := demo.DefaultConfig
	fs.StringVar(&c.PostgresURL, "pg-url", "", "PostgreSQL URL (also from DATABASE_URL)")
	fs.StringVar(&c.Topic, "topic", def.Topic, "demo topic, and table")
	fs.Int32Var(&c.Partitions, "partitions", def.Partitions, "partitions of the demo topic")
	fs.DurationVar(&c.Duration, "duration", def.Duration, "how long the producer writes events")
	fs.IntVar(&c.Rate, "rate", def.Rate, "events per second the producer aims at")
}

// demoCommand runs package demo: an in-process Kafka, a producer, the
// bridge, and a few queries over what landed.
func demoCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo")
	var c demo.Config
	defineDemoFlags(fs, &c)
	if code, ok := parseFlags("demo", demoHelp, fs, args, stdout, stderr); !ok {
		return code
	}
	if c.PostgresURL == "" {
		fmt.Fprintln(stderr, "kafka2pg demo: --pg-url is empty: give a PostgreSQL URL (make demo starts a throwaway cluster and passes it)")
		return exitUsage
	}
	if c.Rate < 1 || c.Duration <= 0 || c.Partitions < 1 {
		fmt.Fprintln(stderr, "kafka2pg demo: --rate, --duration and --partitions must be positive")
		return exitUsage
	}
	if err := demo.Run(ctx, c, stdout, newLogger(stderr, "text", "warn")); err != nil {
		fmt.Fprintf(stderr, "kafka2pg demo: %s\n", cliMessage(redact.Err(err)))
		return exitError
	}
	return exitOK
}

// Package demo runs kafka2pg end to end in one process, on sample data:
// an in-process Kafka (franz-go's kfake) with a topic of page-view events,
// a producer writing them at a given rate, a bridge (package bridge)
// materializing the topic into its zero-config table, and the SQL that
// shows what landed: the rows, the distinct (partition, offset) pairs that
// show each record landed once, and the durable offsets in
// kafka2pg.offsets. `kafka2pg demo` (and `make demo`) runs it; a test or a
// program embedding kafka2pg can call it the same way:
//
//	err := demo.Run(ctx, demo.Config{PostgresURL: url}, os.Stdout, slog.Default())
//
// Run drops the demo's table and the demo group's offsets first, so each
// run starts empty. It joins every goroutine it starts before it returns.
// Package demo imports bridge, sinks (the zero-config sink), reader and
// schema, franz-go (kgo, kadm, kfake) and pgx.
package demo

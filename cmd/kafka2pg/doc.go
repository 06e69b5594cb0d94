// Command kafka2pg materializes Kafka topics into PostgreSQL tables, exactly
// once.
//
// This package is the wiring and nothing clever: flags (pflag, each mirrored
// by a KAFKA2PG_ environment variable), signals, the HTTP endpoints, and the
// connection of the sibling packages: the ingest.Writer is the reader's
// Store (reader.New(cfg, writer)) and its Tracer feeds the metrics. Both
// speak package stream, so reader and ingest never import each other.
//
// Goroutines: runBridge owns one errgroup (the reader's poll loop, the
// caught-up watch, the progress line, the HTTP server); SIGINT or SIGTERM
// cancels it, then the reader is closed, which writes the queued batches,
// commits the durable offsets to the group and leaves it.
//
// Commands: run, check, infer, migrate, status, offsets, dead-letters,
// demo, version, and the hidden docs that writes docs/CONFIGURATION.md and
// docs/METRICS.md. commands.go holds every command's help and flag
// sections, help.go prints them, aliases.go keeps renamed flags working.
// Exit codes: 0 clean stop, 1 a run-time failure, 2 bad flags or
// configuration (nothing was written).
package main

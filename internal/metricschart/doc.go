// Package metricschart draws the README's chart of real metrics: it reads
// values out of a Prometheus text exposition (what the bridge serves at
// /metrics) and renders time series as a self-contained SVG, written by hand
// (no plotting dependency, no scripts, no external fonts or images).
//
// The program in ./cmd runs the workload: an in-process Kafka (kfake), a
// producer, the kafka2pg binary with --metrics-addr, and a scrape of
// /metrics every 250 ms; then it renders docs/img/metrics.svg:
//
//	go run ./internal/metricschart/cmd -bin bin/kafka2pg -pg-url "$PG" -out docs/img/metrics.svg
//
// The package does no I/O of its own beyond the io.Writer it is given and
// starts no goroutines. It imports only the standard library.
package metricschart

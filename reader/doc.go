// Package reader is the Kafka side of kafka2pg: consumer-group membership,
// seeking every newly assigned partition to the position stored in Postgres,
// fetching, per-partition batching with bounded buffers, and mirroring the
// durable offsets back to the Kafka group for lag tools.
//
// # Use
//
// The reader writes into a [Store], which the caller provides (kafka2pg's
// is ingest.Writer):
//
//	r, err := reader.New(reader.Config{Brokers: brokers, Group: "orders-sink", Topics: []string{"orders"}}, store)
//	if err != nil { ... }
//	err = r.Run(ctx)         // until ctx ends, or a *FatalError
//	err = r.Shutdown(sctx)   // flush, commit to the group, leave, within sctx
//
// # Positions come from the Store
//
// The reader never decides where a partition resumes from Kafka's commits.
// On assignment it calls Store.Claim (which fences earlier owners and
// returns the durable next offset) and starts there
// (kgo.AdjustFetchOffsetsFn). Only when nothing is stored does the start
// policy apply (earliest, latest, the group's Kafka commit, or a time).
// After each Store.Write it marks the batch's NextOffset durable and
// mirrors it to the Kafka group on Config.CommitInterval and on revoke; a
// failed group commit is harmless.
//
// # Goroutines
//
// Run owns the poll loop, the commit loop and, when the Store is an
// [EpochReader], the fence check. Each assigned partition has one goroutine
// that batches its records and calls Store.Write; it is started when the
// partition is assigned and joined before the revoke or lost callback
// returns, so a partition is never written by two goroutines of one
// process. On revoke each partition writes what it queued within
// Config.FlushTimeout or abandons it; on lost it abandons it at once (the
// next owner re-reads it from Kafka). Callbacks of franz-go never block on
// the poll loop.
//
// A failed write halts the partition: its queue is dropped, fetching
// pauses, and the partition's goroutine claims again (re-reading the Store,
// never retrying blindly) after the backoff of its failure streak
// (it grows with every failed write or claim in a row and resets
// when a write commits); then the poll loop seeks to the durable position.
// A write that returns a *stream.StopError stops the partition until it is
// revoked or the process restarts.
//
// # Failures and stopping
//
// What may heal (a broker down, Postgres unreachable) is retried and logged
// rate-limited; what will not (credentials, ACLs and privileges refused, a
// certificate that does not verify; see Config.Permanent) is retried for
// Config.FatalRetryTimeout, then Run returns a *FatalError.
// CheckTopics asks before the start whether the topics exist and may be
// read. After Run returns, Shutdown(ctx) flushes, commits the durable
// offsets to the group and leaves it, every step within ctx; Close
// abandons what is in flight. A record batch that
// decompresses past the limit is refused by the client and handed on as a
// span of unreadable records; a refusal the client drops
// with its fetch is fetched again.
//
// # Memory
//
// One budget, Config.MaxBufferedBytes, across all partitions counts the
// records held, queued or being written, as their key and value plus a
// fixed overhead each. A full queue pauses its partition; over the budget
// the poll loop stops polling until a partition frees some (the client then
// holds at most one fetch a broker, and keeps it). The client's
// decompressed batches, not yet taken, have a budget of their own of the
// same size: a batch that does not fit is deferred and fetched again once
// the reader has taken the rest. When a batch is cut, its
// records are copied once into stream.Records, in slices the reader reuses;
// their keys and values stay in the client's fetch buffers. Partitions only
// flip their own paused flag; the poll loop alone calls the client's
// Pause/ResumeFetchPartitions, reconciling the client with the flags before
// each AllowRebalance.
//
// # Fairness
//
// Every fetch lists every partition, least recently served first (fetch
// sessions are off), and unless Config.FetchMaxPartitionBytes is set a
// partition's share of a fetch is FetchMaxBytes over the partitions owned,
// never under twice the largest batch seen.
//
// # Lock order
//
// Reader.mu before partition.mu; Reader.share.mu is taken under Reader.mu
// (assignments) or alone (the fetch hook), never before it; Reader.wakeMu
// is a leaf, taken under either or alone.
//
// The package imports franz-go and stream, never ingest.
package reader

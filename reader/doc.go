// Package reader is the Kafka side of kafka2pg: consumer-group membership,
// seeking every newly assigned partition to the position stored in Postgres,
// fetching, per-partition batching with bounded buffers, and mirroring the
// durable offsets back to the Kafka group for lag tools.
//
// The reader never decides where a partition resumes from Kafka's commits.
// On assignment it calls the ClaimFunc it is given (which fences earlier
// owners and returns the durable next offset) and starts there
// (kgo.AdjustFetchOffsetsFn). Only when nothing is stored does the start
// policy apply (earliest, latest, the group's Kafka commit, or a time).
//
// Goroutines: Run owns the poll loop and the commit loop. Each assigned
// partition has one goroutine that batches its records and calls the
// WriteFunc; it is started when the partition is assigned and joined before
// the revoke or lost callback returns, so a partition is never written by
// two goroutines of one process. On revoke each partition finishes (flushes)
// its queued records within Config.FlushTimeout or abandons them; on lost it
// abandons them at once (the next owner re-reads them from Kafka).
//
// A failed write halts the partition: its queue is dropped, fetching pauses,
// and the partition goroutine re-claims (re-reading Postgres, never retrying
// blindly) after the backoff of its failure streak (streak.go: it grows
// with every failed write or claim in a row and resets when a write
// commits), then the poll loop seeks to the durable position. Callbacks of
// franz-go never block on the poll loop.
//
// Failures: what may heal (a broker down, Postgres unreachable) is retried
// and logged rate-limited; what will not (credentials, ACLs and
// privileges refused, a certificate that does not verify; see
// Config.Permanent) is retried for Config.FatalRetryTimeout, then Run
// returns a *FatalError (fatal.go). CheckTopics asks before the start
// whether the topics exist and may be read.
//
// Stopping: after Run returns, Shutdown(ctx) flushes, commits the durable
// offsets to the group and leaves it, every step within ctx; Close
// abandons what is in flight (shutdown.go).
//
// A record batch that decompresses past MaxBufferedBytes is refused by the
// client and handed on as a span of unreadable offsets (decompress.go).
//
// Memory: one budget (Config.MaxBufferedBytes) across all partitions counts
// the records held, queued or being written, as key and value plus
// recordOverhead each. A full queue pauses its partition; over the budget
// the poll loop stops polling until a partition frees some (waitForBudget;
// the client then holds at most one fetch a broker, and keeps it). Every
// change of a partition's share goes through accountLocked, which wakes the
// waiting loop when the share falls. Partitions only flip their own paused
// flag; the poll loop alone calls the client's Pause/ResumeFetchPartitions,
// reconciling the client with the flags before each AllowRebalance
// (reconcilePauses).
//
// Fairness (fair.go): every fetch lists every partition, least recently
// served first (fetch sessions are off), and unless the user set
// FetchMaxPartitionBytes a partition's share of a fetch is FetchMaxBytes
// over the partitions owned, never under twice the largest batch seen.
//
// Lock order: Reader.mu before partition.mu; Reader.share.mu is taken
// under Reader.mu (assignments) or alone (the fetch hook), never before it;
// Reader.wakeMu is a leaf, taken under either or alone. The package imports
// franz-go, never ingest: cmd/kafka2pg connects the two with the ClaimFunc
// and WriteFunc.
package reader

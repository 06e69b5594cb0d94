// Package decompress bounds the memory franz-go's client spends
// decompressing fetched record batches. A compressed batch can decode to a
// thousand times its size on the wire, and the client decodes every batch
// of a fetch response in its own fetch goroutines before the reader's poll
// sees a record of it, so neither the reader's record budget nor
// kgo.FetchMaxBytes bounds it.
//
// # What it bounds
//
//   - One batch: a Decompressor refuses a batch that decodes to more than
//     its batch limit with kgo.ErrMaxDecompress, holding a few MiB of it
//     at most whatever it decodes to: zstd batches whose frames do not
//     declare their size are counted in constant memory before they are
//     decoded (zstd.go), gzip and lz4 batches are decoded in steps
//     (stream.go).
//   - One fetch: the batches the client holds decoded and the caller has
//     not taken share a budget; a batch that does not fit is deferred
//     (ErrDeferred), and the client fetches it again later (hold.go).
//
// # Use
//
//	dec, err := decompress.New(maxBatchBytes, budget)
//	cl, err := kgo.NewClient(kgo.WithDecompressor(dec), kgo.WithHooks(hook), ...)
//
// After each poll the caller ignores ErrDeferred in the fetch errors, calls
// Release once a poll has drained a fetch and the client buffers no
// record, and holds no more than PollLimit before it polls again. Its
// kgo.HookFetchBatchRead hook asks Refused whether the batch it sees is one
// Decompress refused: the hook knows the batch's partition, Decompress
// does not.
//
// # What it relies on in franz-go
//
// Checked against franz-go v1.22.3 (files under pkg/kgo). franz-go's docs
// promise that a custom decompressor is not bounded by
// MaxDecompressBatchBytes (config.go:1004), and that kgo.ErrMaxDecompress
// from one stops the partition until SetOffsets moves it, reported as a
// *kgo.ErrDecompressTooLarge naming the batch's offsets (compression.go:22-27,
// errors.go:436-462). The rest is how franz-go behaves, not what its docs
// promise; an upgrade must check each again:
//
//   - kgo.Client.OptValue(kgo.WithDecompressor) returns the decompressor
//     the client built for itself, bounded at MaxDecompressBatchBytes
//     (client.go:176-184, client.go:396). New takes franz-go's decoder for
//     snappy, and for batches of ordinary size, from a client it never
//     uses, that way.
//   - franz-go's snappy decoder checks the size each block declares
//     before decoding (compression.go:602-611), and its zstd decoder is
//     bounded by the decoder's own memory limit (compression.go:620-625):
//     this package leaves snappy to it.
//   - An error other than kgo.ErrMaxDecompress from a batch that follows
//     records of the same partition in a response is dropped: the records
//     before it are returned, and the partition is fetched again from the
//     failing batch, as for a response cut off at its end
//     (source.go:1812-1815, with processRecordBatch leaving the offset at
//     the failing batch, source.go:1932-1934). For the partition's first
//     batch in the response the error reaches the poll as the partition's
//     error, and the cursor is fetched again from the same offset once the
//     fetch is drained (source.go:1328-1336; only an
//     *kgo.ErrDecompressTooLarge stops the cursor, source.go:1340-1348).
//     Deferral depends on both: it skips nothing and delivers nothing
//     twice only because of them.
//   - The kgo.HookFetchBatchRead hook runs right after each batch is
//     processed, on the goroutine that decoded it, also for a batch whose
//     decompression failed, with NumRecords 0 and, for record batches,
//     CompressedBytes equal to the length of the bytes handed to
//     Decompress (source.go:1792-1801). Refused matches refusals to
//     partitions by that.
//   - Decompress is called from each broker's fetch goroutine, concurrently
//     (source.go:1328): everything here is safe for concurrent use.
package decompress

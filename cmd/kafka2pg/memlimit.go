package main

// The process's memory: Go's soft memory limit and GOGC, which --memory-limit
// sets for the whole process (a program that embeds the bridge owns its
// own), resized with the partitions the bridge owns
// (reader.Config.OnOwned).

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
)

// setMemoryLimit applies --memory-limit and tunes GOGC under it. Its lines
// are at debug level: they say what the flags asked for, nothing to act on.
func setMemoryLimit(o *runOptions, log *slog.Logger) {
	if o.memoryLimitN > 0 {
		debug.SetMemoryLimit(o.memoryLimitN)
		log.Debug("soft memory limit set", "memory_limit_bytes", o.memoryLimitN)
	}
	if o.memoryLimitAuto {
		limit := autoMemoryLimit(o.cfg.Kafka.MaxBufferedBytes, 0)
		debug.SetMemoryLimit(limit)
		log.Debug("soft memory limit set from --max-buffered-bytes; it grows with the partitions owned", "memory_limit_bytes", limit)
	}
	tuneGC(log)
}

// autoMemoryLimit is --memory-limit auto: Go's soft memory limit from the
// record budget and the partitions owned. The budget bounds the records held
// (with their overhead); a fetch being decoded, the batches being encoded
// and the runtime come on top, and Go's collector, left alone, lets the heap
// grow to twice what is live and returns freed pages lazily. Three times
// the budget keeps the resident memory near a budget's worth of records
// without making the collector run more often than the drain can afford,
// and leaves it room over the live heap. Each owned partition adds 256 KiB
// (its goroutine, queue, client cursor and fetch buffers), so that many
// partitions never get a limit under their live set, which would make the
// collector run without pause. Never under 128 MiB: a small budget does not
// shrink the runtime, the client and the connections.
func autoMemoryLimit(maxBuffered, partitions int) int64 {
	if maxBuffered <= 0 {
		maxBuffered = 64 << 20
	}
	return max(int64(maxBuffered)*3+int64(partitions)*(256<<10), 128<<20)
}

// gcPercentUnderLimit is GOGC while a memory limit is in force. Under a
// backlog the limit paces the collector and GOGC does not matter; in a
// steady flow the heap stays far under the limit, and the default 100 runs
// a cycle for every few tens of MB allocated, a large share of the bridge's
// CPU for nothing. 400 trades some resident memory, still bounded by the
// limit, for that CPU.
const gcPercentUnderLimit = 400

// tuneGC sets GOGC to gcPercentUnderLimit when a memory limit is in force
// and GOGC is not set in the environment (which wins, as GOMEMLIMIT does).
func tuneGC(log *slog.Logger) {
	if os.Getenv("GOGC") != "" || debug.SetMemoryLimit(-1) == math.MaxInt64 {
		return
	}
	debug.SetGCPercent(gcPercentUnderLimit)
	log.Debug("GOGC set under the memory limit (set GOGC to choose another)", "gogc", gcPercentUnderLimit)
}

package main

import (
	"bytes"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/bridge"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"256MiB": 256 << 20, "1GiB": 1 << 30, "300MB": 300e6, "1048576": 1 << 20, " 64 MiB ": 64 << 20, "7KiB": 7 << 10} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1MiB", "1.5GiB", "ten", "99999999999GiB"} {
		if got, err := parseByteSize(bad); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", bad, got)
		}
	}
}

func TestAMemoryLimitBelow32MiBNamesTheFlag(t *testing.T) {
	o := &runOptions{cfg: bridge.Config{PostgresURL: "postgres://x"}, memoryLimit: "16MiB"}
	err := o.validate()
	if err == nil || !strings.Contains(err.Error(), "--memory-limit") {
		t.Fatalf("validate() = %v, want an error naming --memory-limit", err)
	}
}

func TestTheMemoryLimitIsAutoUnlessOffSetOrGivenByGOMEMLIMIT(t *testing.T) {
	if got, want := autoMemoryLimit(64<<20, 0), int64(192<<20); got != want {
		t.Errorf("autoMemoryLimit(64MiB, 0) = %d, want %d (3 × the budget)", got, want)
	}
	if got, want := autoMemoryLimit(64<<20, 1000), int64(192<<20+1000*256<<10); got != want {
		t.Errorf("autoMemoryLimit(64MiB, 1000) = %d, want %d (256KiB a partition on top)", got, want)
	}
	if got, want := autoMemoryLimit(8<<10, 4), int64(128<<20); got != want {
		t.Errorf("autoMemoryLimit(8KiB, 4) = %d, want the 128MiB floor", got)
	}
	t.Setenv("GOMEMLIMIT", "")
	for _, c := range []struct {
		flag string
		auto bool
		n    int64
	}{{"auto", true, 0}, {"off", false, 0}, {"400MiB", false, 400 << 20}} {
		o := &runOptions{cfg: bridge.Config{PostgresURL: "postgres://x"}, memoryLimit: c.flag}
		// The other flags are unset here: only --memory-limit must not be
		// among the complaints.
		if err := o.validate(); err != nil && strings.Contains(err.Error(), "--memory-limit") {
			t.Fatalf("--memory-limit %s: %v", c.flag, err)
		}
		if o.memoryLimitAuto != c.auto || o.memoryLimitN != c.n {
			t.Errorf("--memory-limit %s: auto %v, size %d; want %v, %d", c.flag, o.memoryLimitAuto, o.memoryLimitN, c.auto, c.n)
		}
	}
	t.Setenv("GOMEMLIMIT", "300MiB")
	o := &runOptions{cfg: bridge.Config{PostgresURL: "postgres://x"}, memoryLimit: "auto"}
	_ = o.validate()
	if o.memoryLimitAuto {
		t.Error("with GOMEMLIMIT set, auto must leave the runtime's limit alone")
	}
}

// Under a memory limit GOGC goes to gcPercentUnderLimit unless GOGC is set;
// without a limit it stays.
func TestGOGCIsRaisedOnlyUnderAMemoryLimit(t *testing.T) {
	prevPercent := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	})
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		limit int64
		gogc  string
		want  int
	}{{256 << 20, "", gcPercentUnderLimit}, {256 << 20, "150", 100}, {math.MaxInt64, "", 100}} {
		t.Setenv("GOGC", c.gogc)
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(c.limit)
		tuneGC(log)
		if got := debug.SetGCPercent(100); got != c.want {
			t.Errorf("limit %d, GOGC=%q: GC percent %d, want %d", c.limit, c.gogc, got, c.want)
		}
	}
}

// The byte flags take sizes as --memory-limit does, from the command line
// and the environment alike, and name themselves when a value is wrong.
func TestByteFlagsTakeSizes(t *testing.T) {
	parse := func(args ...string) (runOptions, error) {
		fs := newFlagSet("run")
		var o runOptions
		defineRunFlags(fs, &o)
		err := fs.Parse(args)
		if err == nil {
			err = applyEnv(fs, nil)
		}
		return o, err
	}
	o, err := parse()
	if err != nil || o.cfg.Kafka.MaxBufferedBytes != 64<<20 || o.cfg.Kafka.BatchMaxBytes != 16<<20 || o.cfg.Writer.MaxRecordBytes != 64<<20 || o.cfg.Kafka.FetchMinBytes != 1 {
		t.Fatalf("defaults: %v, buffered %d, batch %d, record %d, fetch min %d", err, o.cfg.Kafka.MaxBufferedBytes, o.cfg.Kafka.BatchMaxBytes, o.cfg.Writer.MaxRecordBytes, o.cfg.Kafka.FetchMinBytes)
	}
	t.Setenv("KAFKA2PG_BATCH_MAX_BYTES", "4MiB")
	o, err = parse("--max-buffered-bytes", "32MiB", "--kafka-fetch-max-bytes=8388608", "--kafka-fetch-max-partition-bytes", "1 MiB", "--max-record-bytes", "0")
	if err != nil || o.cfg.Kafka.MaxBufferedBytes != 32<<20 || o.cfg.Kafka.FetchMaxBytes != 8<<20 || o.cfg.Kafka.FetchMaxPartitionBytes != 1<<20 ||
		o.cfg.Writer.MaxRecordBytes != -1 || o.cfg.Kafka.BatchMaxBytes != 4<<20 { // 0 is the library's no limit, -1
		t.Errorf("sizes: %v, buffered %d, fetch %d, partition %d, record %d, batch %d", err, o.cfg.Kafka.MaxBufferedBytes, o.cfg.Kafka.FetchMaxBytes,
			o.cfg.Kafka.FetchMaxPartitionBytes, o.cfg.Writer.MaxRecordBytes, o.cfg.Kafka.BatchMaxBytes)
	}
	t.Setenv("KAFKA2PG_BATCH_MAX_BYTES", "")
	for _, bad := range [][]string{{"--max-buffered-bytes", "lots"}, {"--kafka-fetch-max-bytes", "3GiB"}, {"--batch-max-bytes", "-1"}} {
		if _, err := parse(bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s %s: %v, want an error naming the flag", bad[0], bad[1], err)
		}
	}
	var help bytes.Buffer
	fs := newFlagSet("run")
	defineRunFlags(fs, &runOptions{})
	runHelp.print(&help, fs)
	if !strings.Contains(help.String(), "(default 64MiB)") {
		t.Errorf("--help does not give --max-buffered-bytes' default as 64MiB:\n%s", help.String())
	}
}

package integration_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

// A decompression bomb: one record batch of values values of
// bombValueBytes zero bytes each, a few KB on the wire and hundreds of MB
// decompressed. It is compressed as a stream, so its frame does not declare
// its size: the bridge's decoder cannot refuse it before decoding, which is
// how Java producers write zstd, gzip and lz4.
const (
	bombValues     = 16
	bombValueBytes = 50 << 20
)

// bombWriter returns a writer that compresses into w with codec, as a
// stream.
func bombWriter(t testing.TB, w io.Writer, codec kgo.CompressionCodecType) io.WriteCloser {
	t.Helper()
	switch codec {
	case kgo.CodecZstd:
		enc, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			t.Fatal(err)
		}
		return enc
	case kgo.CodecGzip:
		enc, err := gzip.NewWriterLevel(w, gzip.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		return enc
	case kgo.CodecLz4:
		enc := lz4.NewWriter(w)
		if err := enc.Apply(lz4.CompressionLevelOption(lz4.Fast), lz4.ConcurrencyOption(1)); err != nil {
			t.Fatal(err)
		}
		return enc
	}
	t.Fatalf("no bomb for codec %d", codec)
	return nil
}

// compressBomb returns a bomb of values records, compressed with codec as
// a stream: the records of one batch.
func compressBomb(t testing.TB, codec kgo.CompressionCodecType, values int) []byte {
	t.Helper()
	var compressed bytes.Buffer
	enc := bombWriter(t, &compressed, codec)
	zeros := make([]byte, 1<<20)
	for i := range values {
		if err := kafkatest.WriteRecord(enc, i, nil, zeros, bombValueBytes, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return compressed.Bytes()
}

// produceBomb appends a bomb of values records, compressed with codec, to
// partition 0 of topic with a raw produce request (a client's producer
// would build the whole batch in memory) and returns the batch's first
// offset and its size on the wire.
func produceBomb(t testing.TB, s *scenario, codec kgo.CompressionCodecType, values int) (first int64, wire int) {
	t.Helper()
	first, wire = kafkatest.ProduceRawBatch(t, s.kafka.NewClient(t), s.topic, 0, codec, values, compressBomb(t, codec, values))
	t.Logf("the bomb: %d values of %d MiB in one %s batch of %d bytes", values, bombValueBytes>>20, codecName(codec), wire)
	return first, wire
}

// peakRSS follows the VmHWM of a process (its peak resident set) in
// /proc/<pid>/status until it ends, and returns the last value read.
type peakRSS struct {
	bytes atomic.Int64
	done  chan struct{}
}

func watchPeakRSS(b *bridge) *peakRSS {
	p := &peakRSS{done: make(chan struct{})}
	path := "/proc/" + strconv.Itoa(b.cmd.Process.Pid) + "/status"
	go func() {
		defer close(p.done)
		for !b.exited() {
			if data, err := os.ReadFile(path); err == nil {
				for line := range strings.SplitSeq(string(data), "\n") {
					if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						if f := strings.Fields(rest); len(f) == 2 {
							if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
								p.bytes.Store(kb << 10)
							}
						}
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return p
}

// codecName is how the bridge's flags and Kafka's configs name codec.
func codecName(codec kgo.CompressionCodecType) string {
	return map[kgo.CompressionCodecType]string{kgo.CodecGzip: "gzip", kgo.CodecSnappy: "snappy", kgo.CodecLz4: "lz4", kgo.CodecZstd: "zstd"}[codec]
}

func TestADecompressionBombBecomesDeadLettersWithinTheMemoryBudget(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("needs /proc to measure the bridge's peak memory: %v", err)
	}
	// values: lz4 compresses zeros about 255 to 1 at most, so its bomb is
	// smaller to stay under the 1 MB a broker takes in one batch.
	for _, tc := range []struct {
		codec  kgo.CompressionCodecType
		values int
		num    string // in the fault report
	}{{kgo.CodecZstd, bombValues, "20"}, {kgo.CodecGzip, bombValues, "20b"}, {kgo.CodecLz4, 4, "20c"}} {
		t.Run(codecName(tc.codec), func(t *testing.T) { testBomb(t, tc.codec, tc.values, tc.num) })
	}
}

// testBomb feeds the bridge a bomb of values records compressed with
// codec, between readable records; num is its case in the fault report.
func testBomb(t *testing.T, codec kgo.CompressionCodecType, values int, num string) {
	s := newScenario(t, 1)
	var wire int
	var notes []string
	reportCase(t, s, 20, func() testreport.FaultResult {
		return testreport.FaultResult{Case: num, Name: "decompression bomb, " + codecName(codec), Trials: 1, Notes: strings.Join(notes, "; "),
			Injection: fmt.Sprintf("one %s record batch of %d values of %d MiB of zeros (%d MiB decompressed, %d KB on the wire, its stream not declaring its size) between 20 readable records; default flags (--max-buffered-bytes 64 MiB)",
				codecName(codec), values, bombValueBytes>>20, values*bombValueBytes>>20, wire/1000)}
	})
	s.produce(t, 10)
	first, wire := produceBomb(t, s, codec, values)
	s.produce(t, 10)
	ends := s.kafka.EndOffsets(t, s.topic)

	b := s.start(t, "bomb-"+codecName(codec), "--until-caught-up") // default flags: --max-buffered-bytes 64MiB
	peak := watchPeakRSS(b)
	requireExit(t, b, 3, 2*time.Minute) // 3: caught up, with dead letters
	<-peak.done
	maxrss := b.state.SysUsage().(*syscall.Rusage).Maxrss << 10
	t.Logf("peak RSS of the bridge (%s bomb of %d MB): VmHWM %d MiB (last read), getrusage %d MiB", codecName(codec), values*bombValueBytes>>20,
		peak.bytes.Load()>>20, maxrss>>20)
	notes = append(notes, fmt.Sprintf("peak RSS of the bridge %d MiB (getrusage; at most 256 MB wanted), exit 3 after %v", maxrss>>20,
		b.ended.Sub(b.started).Round(100*time.Millisecond)))
	if maxrss > 256<<20 || peak.bytes.Load() > 256<<20 {
		t.Errorf("peak RSS %d MiB (VmHWM %d MiB), want at most 256 MB for a bomb of %d MB", maxrss>>20, peak.bytes.Load()>>20, values*bombValueBytes>>20)
	}
	// Every offset is a row or a dead letter.
	if n := countRows(t, s.db, s.table); n != 20 {
		t.Errorf("%d rows, want the 20 readable records", n)
	}
	var dead, kinds int
	var lo, hi int64
	err := s.db.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE error_kind = 'batch_too_large'), coalesce(min(kafka_offset), -1), coalesce(max(kafka_offset), -1)
		FROM kafka2pg.dead_letters WHERE consumer_group = $1 AND topic = $2`, s.group, s.topic).Scan(&dead, &kinds, &lo, &hi)
	if err != nil {
		t.Fatal(err)
	}
	notes = append(notes, fmt.Sprintf("%d dead letters of kind batch_too_large at offsets %d-%d", kinds, lo, hi))
	if dead != values || kinds != values || lo != first || hi != first+int64(values)-1 {
		t.Errorf("dead letters: %d (%d of kind batch_too_large) at offsets %d-%d, want %d at %d-%d", dead, kinds, lo, hi,
			values, first, first+int64(values)-1)
	}
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)
	if !b.logged("--max-buffered-bytes") {
		t.Errorf("the log does not say what to raise to read the batch")
	}
	if codec != kgo.CodecZstd {
		return // the stop below does not depend on the codec
	}

	t.Run("with --on-error=stop the partition stops at the batch", func(t *testing.T) {
		sc := *s
		sc.group = s.group + "-stop"
		sc.table = s.table + "_stop"
		stop := sc.start(t, "bomb-stop", "--until-caught-up", "--on-error=stop")
		_, out := requireExit(t, stop, 1, 2*time.Minute)
		requireLogHas(t, out, "stopped the partition", "batch_too_large", fmt.Sprintf("offset %d", first), "--max-buffered-bytes")
		if n := countRows(t, s.db, sc.table); n != 10 {
			t.Errorf("%d rows, want the 10 before the batch", n)
		}
		if got := sc.durableOffsets(t); got[0] != first {
			t.Errorf("next_offset %v, want %d: nothing at or past the batch", got, first)
		}
	})
}

// A fetch response of many batches, each under the limit a batch may
// decompress to: without a bound on what the client holds decompressed,
// franz-go decodes them all before the bridge takes any (reader/internal/decompress).
const (
	manyBatches      = 34          // 34 x 30 MiB: 1020 MiB decompressed, in one fetch response
	manyBatchRecords = 480         // records a batch
	manyRecordPad    = 64<<10 - 32 // bytes of padding a record: 64 KiB a value
)

// produceManyBatches appends manyBatches zstd batches of JSON records
// {"i":<offset>,"pad":"000..."} to partition 0 of the scenario's empty
// topic, every other one a frame that declares its size (as franz-go's
// producer writes zstd) and the others streams that do not (as Java's
// does). It returns their size on the wire.
func produceManyBatches(t testing.TB, s *scenario) (wire int) {
	t.Helper()
	cl := s.kafka.NewClient(t)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	pad := bytes.Repeat([]byte("0"), 1<<20)
	var plain, compressed bytes.Buffer
	for b := range manyBatches {
		plain.Reset()
		compressed.Reset()
		sized := b%2 == 0
		w := io.WriteCloser(nopCloser{&plain})
		if !sized {
			w = bombWriter(t, &compressed, kgo.CodecZstd)
		}
		for i := range manyBatchRecords {
			n := b*manyBatchRecords + i
			if err := kafkatest.WriteRecord(w, i, fmt.Appendf(nil, `{"i":%d,"pad":"`, n), pad, manyRecordPad, []byte(`"}`)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		src := compressed.Bytes()
		if sized {
			src = enc.EncodeAll(plain.Bytes(), nil)
		}
		first, n := kafkatest.ProduceRawBatch(t, cl, s.topic, 0, kgo.CodecZstd, manyBatchRecords, src)
		if first != int64(b*manyBatchRecords) {
			t.Fatalf("batch %d at offset %d, want %d: the topic was not empty", b, first, b*manyBatchRecords)
		}
		wire += n
	}
	return wire
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func TestManyBatchesUnderTheLimitDecodeWithinTheMemoryBudget(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("needs /proc to measure the bridge's peak memory: %v", err)
	}
	s := newScenario(t, 1)
	wire := produceManyBatches(t, s)
	decoded := manyBatches * manyBatchRecords * (manyRecordPad + 20) >> 20
	t.Logf("%d zstd batches of %d records, %d MiB decompressed, %d KB on the wire", manyBatches, manyBatchRecords, decoded, wire/1000)
	ends := s.kafka.EndOffsets(t, s.topic)

	config := fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: ${K2P_IT_PG_URL}
metrics-addr: ""
sinks:
  - topic: %s
    table: %s
    columns:
      - {name: i, path: i, type: bigint, not_null: true}
    metadata: {topic: kafka_topic, partition: kafka_partition, offset: kafka_offset}
`, s.kafka.Brokers(), s.group, s.topic, s.table)
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// Default flags: --max-buffered-bytes 64MiB, so a batch may decompress
	// to 64 MiB, and the client hold 64 MiB.
	b := startBridgeEnv(t, "many-batches", []string{"K2P_IT_PG_URL=" + s.pgURL}, "run", "--config", path, "--until-caught-up")
	peak := watchPeakRSS(b)
	b.requireExit(t, 0, 2*time.Minute)
	<-peak.done
	maxrss := b.state.SysUsage().(*syscall.Rusage).Maxrss << 10
	t.Logf("peak RSS of the bridge (%d batches, %d MiB decompressed): VmHWM %d MiB (last read), getrusage %d MiB, in %v",
		manyBatches, decoded, peak.bytes.Load()>>20, maxrss>>20, b.ended.Sub(b.started).Round(100*time.Millisecond))
	if maxrss > 256<<20 || peak.bytes.Load() > 256<<20 {
		t.Errorf("peak RSS %d MiB (VmHWM %d MiB), want at most 256 MB for %d batches of %d MiB decompressed together",
			maxrss>>20, peak.bytes.Load()>>20, manyBatches, decoded/manyBatches)
	}
	// Every record is a row, once: its offset and the index it carries agree.
	assertExactlyOnce(t, s.db, s.table, s.topic, ends)
	q := `SELECT count(*), count(DISTINCT i), count(*) FILTER (WHERE i <> kafka_offset) FROM ` + tableName(s.table)
	var rows, distinct, misplaced int64
	if err := s.db.QueryRow(t.Context(), q).Scan(&rows, &distinct, &misplaced); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if want := int64(manyBatches * manyBatchRecords); rows != want || distinct != want || misplaced != 0 {
		t.Errorf("%s = %d rows, %d distinct, %d not at their offset; want %d, %d, 0", q, rows, distinct, misplaced, want, want)
	}
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)
}

// Bombs on many partitions at once, as in issue 35: each a batch of
// multiBombValues values of bombValueBytes.
const multiBombValues = 6

func TestBombsOnManyPartitionsAtOnceAllBecomeDeadLetters(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("needs /proc to measure the bridge's peak memory: %v", err)
	}
	for _, tc := range []struct {
		bombs int32
		codec kgo.CompressionCodecType
		live  bool   // the bombs come while the bridge runs, one partition after another
		num   string // in the fault report
	}{
		{2, kgo.CodecZstd, false, "20d"}, {2, kgo.CodecGzip, false, "20e"},
		{8, kgo.CodecZstd, false, "20f"}, {8, kgo.CodecGzip, false, "20g"},
		{2, kgo.CodecZstd, true, "20h"}, {8, kgo.CodecGzip, true, "20i"},
	} {
		name := fmt.Sprintf("%d partitions, %s", tc.bombs, codecName(tc.codec))
		if tc.live {
			name += ", while the bridge runs"
		}
		t.Run(name, func(t *testing.T) { testBombs(t, tc.bombs, tc.codec, tc.live, tc.num) })
	}
}

// testBombs feeds the bridge a bomb on each of partitions 1 to bombs, the
// first batch of the odd ones and after readable records on the even ones
// (so that the bridge meets them in fetches of their own), readable records
// after each, and ordinary records on partition 0, which has no bomb. With
// live, the bridge runs first and writes what is there; the bombs and the
// records after them come then, partition after partition; num is the case
// in the fault report.
func testBombs(t *testing.T, bombs int32, codec kgo.CompressionCodecType, live bool, num string) {
	const around, ordinary = 10, 25000
	s := newScenario(t, bombs+1)
	readable := int64(ordinary + around*bombs + around*(bombs/2)) // rows wanted
	var wire int
	var notes []string
	reportCase(t, s, readable, func() testreport.FaultResult {
		when := "before the bridge starts (--until-caught-up)"
		if live {
			when = "while the bridge runs, partition after partition, once it has written the records before them"
		}
		name := fmt.Sprintf("decompression bombs on %d partitions at once, %s", bombs, codecName(codec))
		if live {
			name += ", while the bridge runs"
		}
		return testreport.FaultResult{Case: num, Name: name, Trials: 1,
			Notes: strings.Join(notes, "; "),
			Injection: fmt.Sprintf("on each of %d partitions one %s record batch of %d values of %d MiB of zeros (%d MiB decompressed, %d KB on the wire, its stream not declaring its size), "+
				"the first batch of half of them and after %d readable records on the others, %d readable records after each, %s; %d ordinary records on a partition without a bomb; default flags (--max-buffered-bytes 64 MiB)",
				bombs, codecName(codec), multiBombValues, bombValueBytes>>20, multiBombValues*bombValueBytes>>20, wire/1000, around, around, when, ordinary)}
	})
	cl := s.kafka.NewClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo := func(partition int32, n int) {
		t.Helper()
		rs, ids := s.ledger.newRecords(s.topic, n)
		for _, r := range rs {
			r.Partition = partition
		}
		if err := cl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := s.ledger.record(rs, ids); err != nil {
			t.Fatal(err)
		}
	}
	bomb := compressBomb(t, codec, multiBombValues)
	want := make(map[int32]int64) // each bomb's first offset
	produceBombs := func() {
		t.Helper()
		for p := int32(1); p <= bombs; p++ {
			want[p], wire = kafkatest.ProduceRawBatch(t, cl, s.topic, p, codec, multiBombValues, bomb)
			produceTo(p, around)
		}
	}
	for p := int32(2); p <= bombs; p += 2 {
		produceTo(p, around)
	}
	produceTo(0, ordinary)

	name := fmt.Sprintf("bombs-%d-%s", bombs, codecName(codec))
	var b *bridge
	var ends map[int32]int64
	if live {
		b = s.start(t, name+"-live")
	} else {
		produceBombs()
		ends = s.kafka.EndOffsets(t, s.topic)
		b = s.start(t, name, "--until-caught-up")
	}
	peak := watchPeakRSS(b)
	if live {
		waitDurable(t, s, b, s.kafka.EndOffsets(t, s.topic))
		produceBombs()
		ends = s.kafka.EndOffsets(t, s.topic)
		waitDurable(t, s, b, ends)
		b.signal(t, syscall.SIGTERM)
		if !b.wait(time.Minute) {
			b.kill(t)
			t.Fatalf("bridge %s still running a minute after SIGTERM", b.name)
		}
	} else {
		requireExit(t, b, 3, 3*time.Minute) // 3: caught up, with dead letters
	}
	<-peak.done
	maxrss := b.state.SysUsage().(*syscall.Rusage).Maxrss << 10
	took := b.ended.Sub(b.started).Round(100 * time.Millisecond)
	t.Logf("peak RSS of the bridge (%d %s bombs of %d MB): VmHWM %d MiB (last read), getrusage %d MiB; %s after %v", bombs, codecName(codec),
		multiBombValues*bombValueBytes>>20, peak.bytes.Load()>>20, maxrss>>20, b.status(), took)
	notes = append(notes, fmt.Sprintf("peak RSS of the bridge %d MiB (getrusage; at most 256 MB wanted), %s after %v", maxrss>>20, b.status(), took))
	if refetched := strings.Count(logOf(t, b), "dropped the report of a record batch too large"); refetched > 0 {
		// The client dropped refusals with their fetches; the reader
		// fetched those partitions again (reader/refused.go).
		t.Logf("the bridge fetched a partition again %d times after the client dropped its refusal", refetched)
		notes = append(notes, fmt.Sprintf("%d refusals dropped by the client with their fetch, fetched again", refetched))
	}
	if maxrss > 256<<20 || peak.bytes.Load() > 256<<20 {
		t.Errorf("peak RSS %d MiB (VmHWM %d MiB), want at most 256 MB for %d bombs of %d MB", maxrss>>20, peak.bytes.Load()>>20, bombs, multiBombValues*bombValueBytes>>20)
	}
	rows, dead := assertRowOrDeadLetter(t, s, ends)
	notes = append(notes, fmt.Sprintf("%d rows and %d dead letters for %d offsets: each a row or a dead letter, once", rows, dead, rows+dead))
	if rows != readable {
		t.Errorf("%d rows, want the %d readable records", rows, readable)
	}

	// The dead letters are the bombs' offsets, of kind batch_too_large.
	q := `SELECT partition, kafka_offset, error_kind FROM kafka2pg.dead_letters WHERE consumer_group = $1 AND topic = $2 ORDER BY 1, 2`
	res, err := s.db.Query(t.Context(), q, s.group, s.topic)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	got := make(map[int32][]int64)
	for res.Next() {
		var p int32
		var off int64
		var kind string
		if err := res.Scan(&p, &off, &kind); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if kind != "batch_too_large" {
			t.Errorf("dead letter %d/%d of kind %q, want batch_too_large", p, off, kind)
		}
		got[p] = append(got[p], off)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	for p := int32(0); p <= bombs; p++ {
		var span []int64
		if first, ok := want[p]; ok {
			for off := first; off < first+multiBombValues; off++ {
				span = append(span, off)
			}
		}
		if fmt.Sprint(got[p]) != fmt.Sprint(span) {
			t.Errorf("partition %d: dead letters at offsets %v, want %v (%s)", p, got[p], span, q)
		}
	}
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)
}

// assertRowOrDeadLetter checks by SQL that every offset below ends is a
// row of the scenario's table or a dead letter of its group, and only
// one of them, once; it returns how many are rows and dead letters.
func assertRowOrDeadLetter(t testing.TB, s *scenario, ends map[int32]int64) (rows, dead int64) {
	t.Helper()
	var parts []int32
	var offs []int64
	for p, end := range ends {
		parts, offs = append(parts, p), append(offs, end)
	}
	q := `WITH ends(p, e) AS (SELECT * FROM unnest($1::int[], $2::bigint[])),
	offs AS (SELECT p, generate_series(0, e - 1) AS o FROM ends),
	r AS (SELECT kafka_partition AS p, kafka_offset AS o, count(*) AS n FROM ` + tableName(s.table) + ` GROUP BY 1, 2),
	d AS (SELECT partition AS p, kafka_offset AS o, count(*) AS n FROM kafka2pg.dead_letters WHERE consumer_group = $3 AND topic = $4 GROUP BY 1, 2)
SELECT count(*) FILTER (WHERE r.n IS NULL AND d.n IS NULL),
       count(*) FILTER (WHERE r.n > 1 OR d.n > 1 OR (r.n IS NOT NULL AND d.n IS NOT NULL)),
       count(*) FILTER (WHERE r.n IS NOT NULL), count(*) FILTER (WHERE d.n IS NOT NULL),
       (SELECT count(*) FROM r WHERE NOT EXISTS (SELECT FROM offs WHERE offs.p = r.p AND offs.o = r.o)),
       (SELECT count(*) FROM d WHERE NOT EXISTS (SELECT FROM offs WHERE offs.p = d.p AND offs.o = d.o))
FROM offs LEFT JOIN r USING (p, o) LEFT JOIN d USING (p, o)`
	var missing, twice, strayRows, strayDead int64
	if err := s.db.QueryRow(t.Context(), q, parts, offs, s.group, s.topic).Scan(&missing, &twice, &rows, &dead, &strayRows, &strayDead); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if missing != 0 || twice != 0 || strayRows != 0 || strayDead != 0 {
		t.Errorf("%d offsets neither a row nor a dead letter, %d more than once, %d rows and %d dead letters at no offset produced; query:\n%s",
			missing, twice, strayRows, strayDead, q)
	}
	return rows, dead
}

// waitDurable waits until the durable next_offset of every partition is its
// end in ends, failing if the bridge b ends first.
func waitDurable(t *testing.T, s *scenario, b *bridge, ends map[int32]int64) {
	t.Helper()
	pollUntil(t, time.Minute, "every partition's next_offset at its end "+formatOffsets(ends), func() (bool, string) {
		requireRunning(t, b)
		got, err := queryDurableOffsets(t, s.db, s.group, s.topic)
		if err != nil {
			return false, err.Error()
		}
		for p, end := range ends {
			if got[p] != end {
				return false, "next_offset " + formatOffsets(got)
			}
		}
		return true, ""
	})
}

package kafkatest

import (
	"context"
	"hash/crc32"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decompression tests need record batches that no client's producer
// writes: a value of hundreds of MiB, compressed as a stream, or a codec's
// frame without its size. They write the records through a compressor of
// their own (WriteRecord) and append the compressed batch with
// ProduceRawBatch, a raw produce request, so that no producer ever holds
// the batch decompressed.

// WriteRecord writes to w record i of a batch (a v2 record: no key, no
// headers, the offset delta and the timestamp delta i) whose value is
// prefix, padBytes bytes of padding and suffix. The padding is written in
// steps of pad (at least one byte long), repeated and cut to length: a
// MiB of zeros for a bomb.
func WriteRecord(w io.Writer, i int, prefix []byte, pad []byte, padBytes int, suffix []byte) error {
	valueBytes := len(prefix) + padBytes + len(suffix)
	var head []byte
	head = append(head, 0) // attributes
	head = kbin.AppendVarlong(head, int64(i))
	head = kbin.AppendVarint(head, int32(i))
	head = kbin.AppendVarint(head, -1) // a null key
	head = kbin.AppendVarint(head, int32(valueBytes))
	length := len(head) + valueBytes + 1 // + the header count
	head = append(kbin.AppendVarint(nil, int32(length)), head...)
	if _, err := w.Write(append(head, prefix...)); err != nil {
		return err
	}
	for n := padBytes; n > 0; {
		k := min(n, len(pad))
		if _, err := w.Write(pad[:k]); err != nil {
			return err
		}
		n -= k
	}
	_, err := w.Write(append(slices.Clip(suffix), 0)) // then no headers
	return err
}

// ProduceRawBatch appends one record batch of records records, already
// compressed with codec, to partition of topic through cl, and returns
// its first offset and its size on the wire. The batch is sent as it is,
// in a raw produce request to the partition's leader.
func ProduceRawBatch(t testing.TB, cl *kgo.Client, topic string, partition int32, codec kgo.CompressionCodecType, records int, compressed []byte) (first int64, wire int) {
	t.Helper()
	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec), LastOffsetDelta: int32(records) - 1,
		FirstTimestamp: now, MaxTimestamp: now + int64(records) - 1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(records), Records: compressed,
	}
	raw := batch.AppendTo(nil)
	// Length counts what follows it; the CRC (Castagnoli) covers the bytes
	// from the attributes on.
	copy(raw[8:12], kbin.AppendInt32(nil, int32(len(raw)-12)))
	copy(raw[17:21], kbin.AppendInt32(nil, int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) <= int(partition) {
		t.Fatalf("metadata of %s: %v %+v", topic, err, mresp)
	}
	var leader int32 = -1
	for _, p := range mresp.Topics[0].Partitions {
		if p.Partition == partition {
			leader = p.Leader
		}
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, mresp.Topics[0].TopicID // Produce v13 names topics by ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		t.Fatalf("produce a raw batch to %s/%d: %v", topic, partition, err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("produce a raw batch to %s/%d: %v", topic, partition, err)
	}
	return p.BaseOffset, len(raw)
}

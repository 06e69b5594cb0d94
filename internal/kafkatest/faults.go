package kafkatest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds what the fault-matrix tests (integration/faults_*_test.go)
// need beyond the basic helpers: topics with configs, partitions added,
// records deleted, compaction, and reading a topic back as a consumer sees it.

// NewClient returns a client of the cluster configured with opts (after the
// seed brokers), closed when the test ends. Fault tests use it for producers
// with their own partitioner, timeouts or transactional id.
func (k *Kafka) NewClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("create kafka client for %v: %v", k.brokers, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopicWithConfigs is CreateTopic with topic configs, such as
// cleanup.policy=compact.
func (k *Kafka) CreateTopicWithConfigs(t testing.TB, prefix string, partitions int32, configs map[string]string) string {
	t.Helper()
	topic := fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	cfg := make(map[string]*string, len(configs))
	for name, v := range configs {
		cfg[name] = &v
	}
	resp, err := k.adm.CreateTopic(ctx, partitions, -1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %q with %d partitions and configs %v: %v", topic, partitions, configs, err)
	}
	k.created(t, topic, int(partitions))
	return topic
}

// CreateTopicOnReplicas is CreateTopicWithConfigs with the replicas of each
// partition chosen: replicas[p] lists the node ids of partition p, its
// preferred leader first. Fault tests use it to know which node leads and
// which follows.
func (k *Kafka) CreateTopicOnReplicas(t testing.TB, prefix string, replicas [][]int32, configs map[string]string) string {
	t.Helper()
	topic := fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, nodes := range replicas {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), nodes
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	for name, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = name, &v
		rt.Configs = append(rt.Configs, c)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(requestTimeout.Milliseconds())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, k.cl)
	if err == nil && len(resp.Topics) != 1 {
		err = fmt.Errorf("%d topics in the answer", len(resp.Topics))
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create topic %q on replicas %v with configs %v: %v", topic, replicas, configs, err)
	}
	k.created(t, topic, len(replicas))
	return topic
}

// created deletes the topic when the test ends (on a real broker) and waits
// until its partitions have leaders.
func (k *Kafka) created(t testing.TB, topic string, partitions int) {
	t.Helper()
	if k.fake == nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), requestTimeout)
			defer cancel()
			if _, err := k.adm.DeleteTopic(ctx, topic); err != nil {
				t.Logf("delete topic %q: %v", topic, err)
			}
		})
	}
	k.waitPartitions(t, topic, partitions)
}

// AddPartitions adds add partitions to the topic and waits until every
// partition answers a ListOffsets.
func (k *Kafka) AddPartitions(t testing.TB, topic string, add int) {
	t.Helper()
	before := len(k.EndOffsets(t, topic))
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	resp, err := k.adm.CreatePartitions(ctx, add, topic)
	if err == nil {
		err = resp[topic].Err
	}
	if err != nil {
		t.Fatalf("add %d partitions to %q: %v", add, topic, err)
	}
	k.waitPartitions(t, topic, before+add)
}

func (k *Kafka) waitPartitions(t testing.TB, topic string, partitions int) {
	t.Helper()
	Poll(t, requestTimeout, fmt.Sprintf("topic %q has %d partitions with leaders", topic, partitions), func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
		defer cancel()
		ends, err := k.adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		if err := ends.Error(); err != nil {
			return false, err.Error()
		}
		n := len(ends[topic])
		return n == partitions, fmt.Sprintf("%d partitions listed", n)
	})
}

// DeleteRecordsBefore deletes every record below before[p] in each listed
// partition (DeleteRecords: the log start offset moves there, as retention
// moves it), and fails unless each new log start offset is before[p].
func (k *Kafka) DeleteRecordsBefore(t testing.TB, topic string, before map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	resp, err := k.adm.DeleteRecords(ctx, adminOffsets(topic, before))
	if err != nil {
		t.Fatalf("delete records of %q before %v: %v", topic, before, err)
	}
	for p, o := range before {
		r, ok := resp.Lookup(topic, p)
		switch {
		case !ok:
			t.Fatalf("delete records of %q before %v: no answer for partition %d", topic, before, p)
		case r.Err != nil:
			t.Fatalf("delete records of %q partition %d before %d: %v", topic, p, o, r.Err)
		case r.LowWatermark != o:
			t.Fatalf("delete records of %q partition %d before %d: log start offset is now %d", topic, p, o, r.LowWatermark)
		}
	}
}

// StartOffsets returns the log start offset of every partition of the topic.
func (k *Kafka) StartOffsets(t testing.TB, topic string) map[int32]int64 {
	t.Helper()
	return k.listOffsets(t, "start", topic, k.adm.ListStartOffsets)
}

// Compact runs log compaction now on every topic with cleanup.policy=compact
// of the in-process cluster (kfake keeps the last batch of a partition, its
// active segment). A real broker compacts in its own time, in the
// background (log.cleaner.backoff.ms); Compact fails the test there.
func (k *Kafka) Compact(t testing.TB) {
	t.Helper()
	if k.fake == nil {
		t.Fatal("kafkatest: Compact works on the in-process cluster only; a real broker's log cleaner compacts by itself")
	}
	k.fake.Compact()
}

// BrokerCount returns the number of brokers in the cluster's metadata.
func (k *Kafka) BrokerCount(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	md, err := k.adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("broker metadata: %v", err)
	}
	return len(md.Brokers)
}

// ReadCommitted reads every partition of the topic from its log start as a
// read_committed consumer, until it has returned the record at offset
// until[p]-1 of every partition p listed (the caller knows a data record is
// there, e.g. one it produced last), and returns the records in the order
// read. Aborted records and transaction markers are not returned, nor
// records compacted or deleted away. It fails the test after timeout.
func (k *Kafka) ReadCommitted(t testing.TB, topic string, until map[int32]int64, timeout time.Duration) []*kgo.Record {
	t.Helper()
	parts := make(map[int32]kgo.Offset, len(until))
	for p := range until {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl := k.NewClient(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var out []*kgo.Record
	pending := make(map[int32]bool, len(until))
	for p, u := range until {
		if u > 0 {
			pending[p] = true
		}
	}
	for len(pending) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %q as read_committed: %v after %d records; partitions %v not read up to %v",
				topic, ctx.Err(), len(out), pending, until)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Logf("read %q partition %d: %v (retrying)", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if r.Offset >= until[r.Partition]-1 {
				delete(pending, r.Partition)
			}
		})
	}
	return out
}

// HoldRequests makes kfake cluster c hold every request of key (a
// LeaveGroup, say) unanswered until the test ends: a broker that does not
// answer, without a reset.
func HoldRequests(t testing.TB, c *kfake.Cluster, key kmsg.Key) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	c.ControlKey(key.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
}

// PartitionDetail asks the cluster for the metadata of one partition: its
// leader, leader epoch, replicas and ISR. It returns an error instead of
// failing the test, for polls while nodes are down.
func (k *Kafka) PartitionDetail(ctx context.Context, topic string, partition int32) (kadm.PartitionDetail, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	md, err := k.adm.Metadata(ctx, topic)
	if err != nil {
		return kadm.PartitionDetail{}, fmt.Errorf("metadata of %q: %w", topic, err)
	}
	d, ok := md.Topics[topic].Partitions[partition]
	if !ok {
		return kadm.PartitionDetail{}, fmt.Errorf("metadata of %q: no partition %d", topic, partition)
	}
	if d.Err != nil {
		return d, fmt.Errorf("metadata of %s/%d: %w", topic, partition, d.Err)
	}
	return d, nil
}

// GroupCoordinator returns the node id of the group's coordinator (the
// leader of its __consumer_offsets partition, which Kafka creates on the
// first request). It returns an error instead of failing the test, for
// polls.
func (k *Kafka) GroupCoordinator(ctx context.Context, group string) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	r, ok := k.adm.FindGroupCoordinators(ctx, group)[group]
	if !ok {
		return -1, fmt.Errorf("find the coordinator of group %q: no answer", group)
	}
	if r.Err != nil {
		return -1, fmt.Errorf("find the coordinator of group %q: %w", group, r.Err)
	}
	return r.NodeID, nil
}

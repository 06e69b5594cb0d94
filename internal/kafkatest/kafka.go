package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BrokersEnv names the environment variable that points the tests at a real
// broker (comma-separated host:port) instead of an in-process kfake cluster.
const BrokersEnv = "KAFKA2PG_TEST_BROKERS"

// requestTimeout bounds every single admin or produce call a helper makes,
// so a wedged broker fails the test with the operation's name instead of
// hanging until the package timeout.
const requestTimeout = 30 * time.Second

// Kafka is a cluster for one test: either an in-process kfake cluster that
// dies with the test, or the real broker named by KAFKA2PG_TEST_BROKERS.
// Its methods are safe for concurrent use.
type Kafka struct {
	brokers []string
	fake    *kfake.Cluster // nil when a real broker is used
	cl      *kgo.Client    // producer and admin connection
	adm     *kadm.Client
}

// New returns a Kafka for the test. Without KAFKA2PG_TEST_BROKERS it starts a
// one-broker kfake cluster on a random 127.0.0.1 port; with it, it connects to
// those brokers. Everything is closed when the test ends.
func New(t testing.TB) *Kafka {
	t.Helper()
	k := &Kafka{}
	if env := strings.TrimSpace(os.Getenv(BrokersEnv)); env != "" {
		for b := range strings.SplitSeq(env, ",") {
			if b = strings.TrimSpace(b); b != "" {
				k.brokers = append(k.brokers, b)
			}
		}
	} else {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatalf("start kfake cluster: %v", err)
		}
		t.Cleanup(c.Close)
		k.fake = c
		k.brokers = c.ListenAddrs()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.brokers...),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordDeliveryTimeout(requestTimeout),
	)
	if err != nil {
		t.Fatalf("create kafka client for %v: %v", k.brokers, err)
	}
	t.Cleanup(cl.Close)
	k.cl = cl
	k.adm = kadm.NewClient(cl)
	return k
}

// Fake reports whether this is the in-process kfake cluster.
func (k *Kafka) Fake() bool { return k.fake != nil }

// FakeCluster is the in-process kfake cluster, for tests that control its
// answers (kfake.Cluster.ControlKey); nil when a real broker is used.
func (k *Kafka) FakeCluster() *kfake.Cluster { return k.fake }

// Brokers returns the host:port list to hand to the bridge's --kafka-brokers.
func (k *Kafka) Brokers() string { return strings.Join(k.brokers, ",") }

// CreateTopic creates a topic named prefix plus a random suffix with the given
// number of partitions, waits until every partition answers a ListOffsets, and
// returns the name. On a real broker the topic is deleted when the test ends.
func (k *Kafka) CreateTopic(t testing.TB, prefix string, partitions int32) string {
	t.Helper()
	topic := fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	if _, err := k.adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		t.Fatalf("create topic %q with %d partitions: %v", topic, partitions, err)
	}
	k.DeleteTopicAtEnd(t, topic)
	// A fresh topic on a real broker can take a moment to have leaders.
	k.waitPartitions(t, topic, int(partitions))
	return topic
}

// DeleteTopicAtEnd deletes topic, created by the test in some other way, when
// the test ends, on a real broker (kfake goes with its cluster).
func (k *Kafka) DeleteTopicAtEnd(t testing.TB, topic string) {
	if k.fake != nil {
		return
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), requestTimeout)
		defer cancel()
		if _, err := k.adm.DeleteTopic(ctx, topic); err != nil {
			t.Logf("delete topic %q: %v", topic, err)
		}
	})
}

// Produce writes the records synchronously and fails the test on any error.
// On return each record's Partition and Offset say where it landed.
func (k *Kafka) Produce(t testing.TB, rs ...*kgo.Record) {
	t.Helper()
	if err := k.TryProduce(t.Context(), rs...); err != nil {
		t.Fatal(err)
	}
}

// TryProduce writes the records synchronously and returns the first error.
// On success each record's Partition and Offset say where it landed. It is
// meant for producer goroutines, which must not call t.Fatal.
func (k *Kafka) TryProduce(ctx context.Context, rs ...*kgo.Record) error {
	if len(rs) == 0 {
		return nil
	}
	if err := k.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("produce %d records to %q: %w", len(rs), rs[0].Topic, err)
	}
	return nil
}

// EndOffsets returns the end offset (high watermark) of every partition of the
// topic: the offset the next produced record will get.
func (k *Kafka) EndOffsets(t testing.TB, topic string) map[int32]int64 {
	t.Helper()
	ends := k.listOffsets(t, "end", topic, k.adm.ListEndOffsets)
	if len(ends) == 0 {
		t.Fatalf("list end offsets of %q: no partitions in the answer", topic)
	}
	return ends
}

// listOffsets lists one kind of offset of every partition of the topic.
func (k *Kafka) listOffsets(t testing.TB, kind, topic string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	listed, err := list(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("list %s offsets of %q: %v", kind, topic, err)
	}
	out := make(map[int32]int64)
	for p, o := range listed[topic] {
		out[p] = o.Offset
	}
	return out
}

// GroupOffsets returns the group's committed offsets for the topic, by
// partition. Partitions without a commit are absent; an unknown group has
// none. A failed fetch is tried again (Poll) for requestTimeout: right
// after a fault case restarts a broker, the admin client's connection to
// it can answer EOF once.
func (k *Kafka) GroupOffsets(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	var fetched kadm.OffsetResponses
	Poll(t, requestTimeout, fmt.Sprintf("the committed offsets of group %q", group), func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
		defer cancel()
		var err error
		fetched, err = k.adm.FetchOffsets(ctx, group)
		if errors.Is(err, kerr.GroupIDNotFound) {
			fetched = nil // kfake's answer for a group that never committed
			return true, ""
		}
		if err == nil {
			err = fetched.Error()
		}
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	committed := make(map[int32]int64)
	for p, o := range fetched[topic] {
		if o.At >= 0 {
			committed[p] = o.At
		}
	}
	return committed
}

// adminOffsets is at, the offsets of topic's partitions, as kadm takes
// them (no leader epoch).
func adminOffsets(topic string, at map[int32]int64) kadm.Offsets {
	offsets := make(kadm.Offsets)
	for p, o := range at {
		offsets.AddOffset(topic, p, o, -1)
	}
	return offsets
}

// CommitGroupOffsets overwrites the group's committed offsets for the topic,
// like kafka-consumer-groups --reset-offsets. Kafka accepts this only while
// the group has no live members; see [Kafka.WaitGroupEmpty].
func (k *Kafka) CommitGroupOffsets(t testing.TB, group, topic string, offsets map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	if err := k.adm.CommitAllOffsets(ctx, group, adminOffsets(topic, offsets)); err != nil {
		t.Fatalf("commit offsets %v of %q for group %q: %v", offsets, topic, group, err)
	}
}

// GroupMember is one member of a consumer group and the partitions of one
// topic it was assigned.
type GroupMember struct {
	ClientID   string
	MemberID   string
	Partitions []int32
}

// String prints the member as "<member id>:[partitions]".
func (m GroupMember) String() string {
	return fmt.Sprintf("%s:%v", m.MemberID, m.Partitions)
}

// GroupState returns the group's state (Stable, PreparingRebalance,
// Empty, ...) and its members with their partitions of topic, sorted by
// member id.
func (k *Kafka) GroupState(t testing.TB, group, topic string) (string, []GroupMember) {
	t.Helper()
	g, err := k.describeGroup(t.Context(), group)
	if err != nil {
		t.Fatal(err)
	}
	return g.State, groupMembers(g, topic)
}

// WaitGroupStable waits until the group is Stable with exactly members
// members, each assigned at least one partition of topic, and together
// assigned all of its partitions. It returns the members, sorted by member id.
func (k *Kafka) WaitGroupStable(t testing.TB, group, topic string, members int, partitions int32, timeout time.Duration) []GroupMember {
	t.Helper()
	var got []GroupMember
	Poll(t, timeout, fmt.Sprintf("group %q stable with %d members covering %d partitions of %q", group, members, partitions, topic), func() (bool, string) {
		g, err := k.describeGroup(t.Context(), group)
		if err != nil {
			return false, err.Error()
		}
		got = groupMembers(g, topic)
		return g.State == "Stable" && Covers(got, members, partitions), fmt.Sprintf("state %s, members %v", g.State, got)
	})
	return got
}

// Covers reports whether there are exactly n members, each assigned at least
// one partition, and together assigned all partitions [0, partitions).
func Covers(members []GroupMember, n int, partitions int32) bool {
	if len(members) != n {
		return false
	}
	covered := make(map[int32]bool)
	for _, m := range members {
		if len(m.Partitions) == 0 {
			return false
		}
		for _, p := range m.Partitions {
			covered[p] = true
		}
	}
	for p := range partitions {
		if !covered[p] {
			return false
		}
	}
	return true
}

func groupMembers(g kadm.DescribedGroup, topic string) []GroupMember {
	var ms []GroupMember
	for _, m := range g.Members {
		gm := GroupMember{ClientID: m.ClientID, MemberID: m.MemberID}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, a := range c.Topics {
				if a.Topic == topic {
					gm.Partitions = append(gm.Partitions, a.Partitions...)
				}
			}
		}
		slices.Sort(gm.Partitions)
		ms = append(ms, gm)
	}
	slices.SortFunc(ms, func(a, b GroupMember) int { return strings.Compare(a.MemberID, b.MemberID) })
	return ms
}

// WaitGroupEmpty waits until the group has no live members (state Empty or
// Dead), which is when Kafka accepts offset commits from outside the group.
func (k *Kafka) WaitGroupEmpty(t testing.TB, group string, timeout time.Duration) {
	t.Helper()
	Poll(t, timeout, fmt.Sprintf("group %q empty", group), func() (bool, string) {
		g, err := k.describeGroup(t.Context(), group)
		if err != nil {
			return false, err.Error()
		}
		return len(g.Members) == 0 && (g.State == "Empty" || g.State == "Dead"),
			fmt.Sprintf("state %s with %d members", g.State, len(g.Members))
	})
}

func (k *Kafka) describeGroup(ctx context.Context, group string) (kadm.DescribedGroup, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	described, err := k.adm.DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, fmt.Errorf("describe group %q: %w", group, err)
	}
	g, ok := described[group]
	if !ok {
		return kadm.DescribedGroup{}, fmt.Errorf("describe group %q: not in the answer", group)
	}
	if errors.Is(g.Err, kerr.GroupIDNotFound) {
		// kfake's answer for a group nobody joined yet; Kafka says Dead.
		return kadm.DescribedGroup{Group: group, State: "Dead"}, nil
	}
	if g.Err != nil {
		return kadm.DescribedGroup{}, fmt.Errorf("describe group %q: %w", group, g.Err)
	}
	return g, nil
}

// Poll calls check every 50ms until it reports done, and fails the test with
// what and the last status check gave when timeout passes first.
func Poll(t testing.TB, timeout time.Duration, what string, check func() (done bool, status string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, status := check()
		if done {
			return
		}
		if err := t.Context().Err(); err != nil {
			t.Fatalf("wait for %s: %v (last status: %s)", what, err, status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("wait for %s: not done after %v (last status: %s)", what, timeout, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

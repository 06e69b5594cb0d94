package kafkatest_test

import (
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
)

func TestProducedRecordsMoveTheEndOffsets(t *testing.T) {
	k := kafkatest.New(t)
	topic := k.CreateTopic(t, "kafkatest", 3)
	if again := k.CreateTopic(t, "kafkatest", 3); again == topic {
		t.Fatalf("CreateTopic returned %q twice", topic)
	}

	var rs []*kgo.Record
	for i := range 30 {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("{}")})
	}
	k.Produce(t, rs...)

	want := make(map[int32]int64)
	for _, r := range rs {
		if r.Offset != want[r.Partition] {
			t.Errorf("record %s landed at partition %d offset %d; want offset %d", r.Key, r.Partition, r.Offset, want[r.Partition])
		}
		want[r.Partition]++
	}
	for p := range int32(3) {
		if _, ok := want[p]; !ok {
			want[p] = 0
		}
	}
	if got := k.EndOffsets(t, topic); !maps.Equal(got, want) {
		t.Errorf("EndOffsets = %v; want %v", got, want)
	}
}

func TestGroupOffsetsCanBeRewrittenWhileTheGroupIsEmpty(t *testing.T) {
	k := kafkatest.New(t)
	topic := k.CreateTopic(t, "kafkatest", 2)
	const group = "kafkatest-group"

	if got := k.GroupOffsets(t, group, topic); len(got) != 0 {
		t.Fatalf("GroupOffsets of a new group = %v; want none", got)
	}
	k.WaitGroupEmpty(t, group, 10*time.Second)
	want := map[int32]int64{0: 7, 1: 0}
	k.CommitGroupOffsets(t, group, topic, want)
	if got := k.GroupOffsets(t, group, topic); !maps.Equal(got, want) {
		t.Errorf("GroupOffsets after CommitGroupOffsets(%v) = %v", want, got)
	}
}

func TestCoversNeedsEveryMemberBusyAndEveryPartitionAssigned(t *testing.T) {
	m := func(ps ...int32) kafkatest.GroupMember { return kafkatest.GroupMember{Partitions: ps} }
	cases := []struct {
		name    string
		members []kafkatest.GroupMember
		want    bool
	}{
		{"two members splitting four partitions", []kafkatest.GroupMember{m(0, 1), m(2, 3)}, true},
		{"a member without partitions", []kafkatest.GroupMember{m(0, 1, 2, 3), m()}, false},
		{"a partition nobody has", []kafkatest.GroupMember{m(0, 1), m(2)}, false},
		{"one member too many", []kafkatest.GroupMember{m(0), m(1), m(2, 3)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := kafkatest.Covers(tc.members, 2, 4); got != tc.want {
				t.Errorf("Covers(%v, 2 members, 4 partitions) = %v; want %v", tc.members, got, tc.want)
			}
		})
	}
}

package integration_test

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

// TestScaleThroughputMatrix drains the same backlog with 1, 2 and 3
// processes of one group (64 partitions), and with one process over 8, 64
// and 512 partitions, once per column of the matrix (scaleVariants: the
// default, cross-partition batches, and KAFKA2PG_SCALE_VARIANTS). Each cell
// has its own group and table; rows/s is measured between 20% and 80% of
// the backlog durable in kafka2pg.offsets, so start-up and rebalances at
// the start, and the tail, do not count. Every cell ends with the
// exactly-once check of its table. KAFKA2PG_SCALE=1 only.
func TestScaleThroughputMatrix(t *testing.T) {
	requireFullScale(t)
	const backlog = 800_000
	s := newScenario(t, 1)
	topics := map[int32]string{}
	for _, parts := range []int32{8, 64, 512} {
		topic := s.kafka.CreateTopic(t, fmt.Sprintf("tp-%d", parts), parts)
		cl := s.kafka.NewClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
			kgo.MaxBufferedRecords(100_000))
		rs := make([]*kgo.Record, backlog)
		for i := range rs {
			rs[i] = newRecord(topic, int64(i))
			rs[i].Partition = int32(i) % parts
		}
		if err := cl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
			t.Fatalf("produce the backlog of %s: %v", topic, err)
		}
		topics[parts] = topic
	}
	type cell struct {
		axis                  string
		instances, partitions int
	}
	cells := []cell{
		{"instances", 1, 64}, {"instances", 2, 64}, {"instances", 3, 64},
		{"partitions", 1, 8}, {"partitions", 1, 64}, {"partitions", 1, 512},
	}
	results := map[string]float64{}
	for _, v := range scaleVariants(t) {
		for i, c := range cells {
			name := fmt.Sprintf("%s/%d instances × %d partitions", v.name, c.instances, c.partitions)
			key := fmt.Sprintf("%s/%d/%d", v.name, c.instances, c.partitions)
			if r, ok := results[key]; ok { // 1 × 64 is in both tables: measure once
				reportThroughput(t, s, v, c.axis, c.instances, c.partitions, backlog, r, 0)
				continue
			}
			t.Run(strings.ReplaceAll(name, "/", " "), func(t *testing.T) {
				topic := topics[int32(c.partitions)]
				group := fmt.Sprintf("%s-tp-%d-%d", s.group, len(results), i)
				table := fmt.Sprintf("%s_tp_%d_%d", s.table, len(results), i)
				flags := scaleFlags(append([]string{
					"run", "--kafka-brokers", s.kafka.Brokers(), "--kafka-group", group, "--topic", topic,
					"--pg-url", s.pgURL, "--pg-table", table, "--metrics-addr=", "--kafka-fetch-max-wait", "250ms",
				}, append(scaleGroupFlags(s.kafka), v.flags...)...)...)
				start := time.Now()
				var bs []*bridge
				for n := range c.instances {
					bs = append(bs, startBridge(t, fmt.Sprintf("tp-%d", n), flags...))
				}
				var t20, t80 time.Time
				pollUntil(t, 5*time.Minute, "the backlog durable", func() (bool, string) {
					requireRunning(t, bs...)
					n := sumOffsets(t, s.db, group)
					now := time.Now()
					if t20.IsZero() && n >= backlog/5 {
						t20 = now
					}
					if t80.IsZero() && n >= backlog*4/5 {
						t80 = now
					}
					return n == backlog, fmt.Sprintf("%d of %d durable", n, backlog)
				})
				wall := time.Since(start)
				for _, b := range bs {
					b.signal(t, syscall.SIGTERM)
				}
				for _, b := range bs {
					b.requireExitZero(t, time.Minute)
				}
				assertExactlyOnce(t, s.db, table, topic, s.kafka.EndOffsets(t, topic))
				rate := float64(backlog*3/5) / max(t80.Sub(t20).Seconds(), 0.001)
				t.Logf("%s: %.0f rows/s between 20%% and 80%% durable; whole backlog in %v", name, rate, wall.Round(time.Millisecond))
				results[key] = rate
				reportThroughput(t, s, v, c.axis, c.instances, c.partitions, backlog, rate, wall.Seconds())
			})
		}
	}
}

func reportThroughput(t testing.TB, s *scenario, v scaleVariant, axis string, instances, partitions, records int, rate, wall float64) {
	reportScale(t, testreport.ScaleEntry{Kind: testreport.KindThroughput, Broker: brokerName(s.kafka), Throughput: &testreport.Throughput{
		Variant: v.name, Flags: slices.Clone(v.flags), Axis: axis, Instances: instances, Partitions: partitions,
		Records: int64(records), RowsPerSec: rate, WallSecs: wall,
	}})
}

// TestScaleRecoveryAfterInstanceLoss kills one of two instances (SIGKILL)
// under load and measures the time until every partition it owned wrote
// again, under several group settings: dynamic membership with the
// shortest session timeout the broker allows and with a longer one, and
// static membership with the process restarted at once with the same
// --kafka-instance-id. KAFKA2PG_SCALE=1 only.
func TestScaleRecoveryAfterInstanceLoss(t *testing.T) {
	requireFullScale(t)
	s := newScenario(t, 16)
	short := sessionTimeout(s.kafka)
	long := 3 * short
	timing := func(session time.Duration) []string {
		return []string{"--kafka-session-timeout", session.String(), "--kafka-heartbeat-interval", (session / 10).String(),
			"--kafka-rebalance-timeout", (2 * session).String()}
	}
	cases := []struct {
		setting string
		flags   []string
		restart bool
	}{
		{fmt.Sprintf("dynamic membership, session timeout %v", short), timing(short), false},
		{fmt.Sprintf("dynamic membership, session timeout %v", long), timing(long), false},
		{fmt.Sprintf("static membership (--kafka-instance-id), session timeout %v, not restarted", short), timing(short), false},
		{fmt.Sprintf("static membership, session timeout %v, restarted at once with the same instance id", long), timing(long), true},
	}
	prod := s.startProducer(t, 48, 40*time.Millisecond, 5_000_000)
	for i, c := range cases {
		t.Run(c.setting, func(t *testing.T) {
			group := fmt.Sprintf("%s-rec-%d", s.group, i)
			table := fmt.Sprintf("%s_rec_%d", s.table, i)
			static := strings.HasPrefix(c.setting, "static")
			args := func(name string) []string {
				a := []string{"run", "--kafka-brokers", s.kafka.Brokers(), "--kafka-group", group, "--topic", s.topic,
					"--pg-url", s.pgURL, "--pg-table", table, "--metrics-addr=", "--kafka-fetch-max-wait", "250ms",
					"--batch-max-wait", "100ms", "--kafka-client-id", "kafka2pg-" + name}
				if static {
					a = append(a, "--kafka-instance-id", fmt.Sprintf("rec-%d-%s", i, name))
				}
				return scaleFlags(append(a, c.flags...)...)
			}
			a := startBridge(t, "A", args("A")...)
			b := startBridge(t, "B", args("B")...)
			members := s.kafka.WaitGroupStable(t, group, s.topic, 2, s.partitions, 2*time.Minute)
			var owned []int32
			for _, m := range members {
				if m.ClientID == "kafka2pg-B" {
					owned = m.Partitions
				}
			}
			if len(owned) == 0 {
				t.Fatalf("no member with client id kafka2pg-B in %v", members)
			}
			// Every partition writing before the kill.
			from, _ := queryDurableOffsets(t, s.db, group, s.topic)
			pollUntil(t, time.Minute, "every partition writing", func() (bool, string) {
				requireRunning(t, a, b)
				got, _ := queryDurableOffsets(t, s.db, group, s.topic)
				for p := range s.partitions {
					if got[p] <= from[p] {
						return false, fmt.Sprintf("partition %d at %d", p, got[p])
					}
				}
				return true, ""
			})
			killed := time.Now()
			b.kill(t)
			at, _ := queryDurableOffsets(t, s.db, group, s.topic) // the dead writes no more
			alive := []*bridge{a}
			if c.restart {
				alive = append(alive, startBridge(t, "B2", args("B")...))
			}
			pollUntil(t, long+time.Minute, "every partition of the killed instance writing again", func() (bool, string) {
				requireRunning(t, alive...)
				got, _ := queryDurableOffsets(t, s.db, group, s.topic)
				for _, p := range owned {
					if got[p] <= at[p] {
						return false, fmt.Sprintf("partition %d still at %d", p, got[p])
					}
				}
				return true, ""
			})
			took := time.Since(killed)
			t.Logf("%s: the %d partitions of the killed instance wrote again %v after kill -9", c.setting, len(owned), took.Round(time.Millisecond))
			for _, x := range alive {
				x.signal(t, syscall.SIGTERM)
			}
			for _, x := range alive {
				x.requireExitZero(t, time.Minute)
			}
			reportScale(t, testreport.ScaleEntry{Kind: testreport.KindRecovery, Broker: brokerName(s.kafka), Recovery: &testreport.Recovery{
				Setting: c.setting, Flags: c.flags, Partitions: int(s.partitions), Moved: len(owned), Seconds: took.Seconds(),
			}})
		})
	}
	prod.stopAndCheck(t)
}

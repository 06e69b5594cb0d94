package admin_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kafka2pg/kafka2pg/admin"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/offsets"
	"github.com/kafka2pg/kafka2pg/reader"
)

// TestStatusReachesASASLBrokerWithTheSecurityOptions checks that Status
// speaks to the brokers with Kafka.Security: the lag of a partition of a
// broker that demands SASL comes back with the credentials, and not
// without them.
func TestStatusReachesASASLBrokerWithTheSecurityOptions(t *testing.T) {
	const user, pass, topic, group = "ops", "ops-Pa55word", "orders", "orders-sink"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", user, pass))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	broker := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	_, pool := pgtest.MigratedPool(t)
	st, err := offsets.New(pool, offsets.Config{Group: group})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(ctx, topic, []int32{0}); err != nil {
		t.Fatal(err)
	}

	k := admin.Kafka{Brokers: []string{broker}, Security: reader.Security{SASLMechanism: "PLAIN", SASLUser: user, SASLPassword: pass}}
	states, err := admin.Status(ctx, pool, admin.Filter{Group: group}, k)
	if err != nil {
		t.Fatalf("Status with SASL: %v", err)
	}
	if len(states) != 1 || states[0].EndOffset == nil || *states[0].EndOffset != 5 || states[0].Lag == nil || *states[0].Lag != 5 {
		t.Fatalf("Status with SASL = %+v, want one partition at end offset 5, lag 5", states)
	}

	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	k.Security = reader.Security{}
	if states, err := admin.Status(short, pool, admin.Filter{Group: group}, k); err == nil {
		t.Fatalf("Status without SASL against a SASL broker = %+v, want an error", states)
	}
}

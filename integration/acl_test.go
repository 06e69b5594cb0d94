package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/internal/tlstest"
)

// TestDeniedACLsStopTheBridgeAndNameTheGrant runs the bridge as a SASL
// user of a kfake cluster with ACLs on, allowed the group but not the
// topic, then the topic but not the group: each is fatal after
// --fatal-retry-timeout, with one ERROR line that names the ACL to grant.
// (The real SASL broker of scripts/kafka-up-sasl.sh has no authorizer, so
// this runs on kfake only.)
func TestDeniedACLsStopTheBridgeAndNameTheGrant(t *testing.T) {
	pgURL := pgtest.URL(t)
	const admin, user = "admin", "bridge"
	adminPass, userPass := secret("acl-admin"), secret("acl-bridge")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", admin, adminPass), kfake.EnableACLs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	broker := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.SASL(scram.Auth{User: admin, Pass: adminPass}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	topic := fmt.Sprintf("kafka2pg-acl-%08x", rand.Uint32())
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, topic, 10)
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: userPass}}); err != nil {
		t.Fatal(err)
	}
	passFile := tlstest.WriteFile(t, t.TempDir(), "password", []byte(userPass+"\n"))
	allow := func(b *kadm.ACLBuilder) {
		t.Helper()
		results, err := adm.CreateACLs(ctx, b.Allow("User:"+user).AllowHosts().ResourcePatternType(kadm.ACLPatternLiteral))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	run := func(t *testing.T, name, group string, want ...string) {
		args := bridgeArgs(broker, topic, randomTable(), "--pg-url", pgURL, "--kafka-group", group, "--fatal-retry-timeout", "2s",
			"--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-user", user, "--kafka-sasl-password-file", passFile)
		took, out := requireExit(t, startBridge(t, name, args...), 1, time.Minute)
		requireLogHas(t, out, want...)
		if took < 2*time.Second {
			t.Errorf("exited after %v: an ACL is retried for --fatal-retry-timeout (2s) first", took)
		}
		if n := errorLines(out); n != 1 {
			t.Errorf("%d ERROR lines, want one clear one", n)
		}
		assertNoSecret(t, "the log", out, userPass, adminPass)
	}

	t.Run("the topic denied", func(t *testing.T) {
		group := fmt.Sprintf("kafka2pg-acl-g1-%08x", rand.Uint32())
		allow(kadm.NewACLs().Groups(group).Operations(kadm.OpRead, kadm.OpDescribe))
		run(t, "topic-denied", group, "TOPIC_AUTHORIZATION_FAILED", "READ and DESCRIBE on the topic", "kafka-acls")
	})
	t.Run("the group denied", func(t *testing.T) {
		allow(kadm.NewACLs().Topics(topic).Operations(kadm.OpRead, kadm.OpDescribe))
		group := fmt.Sprintf("kafka2pg-acl-g2-%08x", rand.Uint32())
		run(t, "group-denied", group, "GROUP_AUTHORIZATION_FAILED", "READ on the group", group)
	})
}

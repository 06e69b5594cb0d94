package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/internal/testreport"
	"github.com/kafka2pg/kafka2pg/internal/tlstest"
)

// TestDeniedACLsStopTheBridgeAndNameTheGrant runs the bridge as a SASL
// user of a kfake cluster with ACLs on, allowed the group but not the
// topic, then the topic but not the group: each is fatal after
// --fatal-retry-timeout, with one ERROR line that names the ACL to grant.
// TestDeniedACLsOnARealBroker does the same on Apache Kafka.
func TestDeniedACLsStopTheBridgeAndNameTheGrant(t *testing.T) {
	parallel(t)
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
	passFile := addSCRAMUser(t, ctx, adm, user, userPass)
	args := func(group string) []string {
		return bridgeArgs(broker, topic, randomTable(), "--pg-url", pgURL, "--kafka-group", group, "--fatal-retry-timeout", "2s",
			"--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-user", user, "--kafka-sasl-password-file", passFile)
	}
	secrets := []string{userPass, adminPass}

	t.Run("the topic denied", func(t *testing.T) {
		group := fmt.Sprintf("kafka2pg-acl-g1-%08x", rand.Uint32())
		grantACLs(t, ctx, adm, "User:"+user, kadm.NewACLs().Groups(group).Operations(kadm.OpRead, kadm.OpDescribe))
		requireDenied(t, nil, "topic-denied", args(group), secrets, "TOPIC_AUTHORIZATION_FAILED", "READ and DESCRIBE on the topic",
			"kafka-acls --add --allow-principal User:"+user, "--topic "+topic)
	})
	t.Run("the group denied", func(t *testing.T) {
		grantACLs(t, ctx, adm, "User:"+user, kadm.NewACLs().Topics(topic).Operations(kadm.OpRead, kadm.OpDescribe))
		group := fmt.Sprintf("kafka2pg-acl-g2-%08x", rand.Uint32())
		requireDenied(t, nil, "group-denied", args(group), secrets, "GROUP_AUTHORIZATION_FAILED", "READ on the group",
			"--allow-principal User:"+user, "--group "+group)
	})
}

// TestDeniedACLsOnARealBroker is the same matrix on Apache Kafka with
// KRaft's StandardAuthorizer (scripts/kafka-up-sasl.sh), through its
// SASL_SSL listener, and then the grants that let the rows in. The topic
// and the denied group carry an ACL for another principal: on that broker
// a resource without ACLs is open to everyone.
func TestDeniedACLsOnARealBroker(t *testing.T) {
	k := startSASLKafka(t)
	t.Setenv(kafkatest.BrokersEnv, k.listeners["PLAINTEXT"]) // the scenario's admin: a super user
	s := newScenario(t, 2)
	var notes []string
	reportCase(t, s, 200, func() testreport.FaultResult {
		return testreport.FaultResult{Case: "22", Name: "denied ACLs on a real broker", Trials: 3, Notes: strings.Join(notes, "; "),
			Injection: "KRaft StandardAuthorizer (scripts/kafka-up-sasl.sh), SASL_SSL SCRAM-SHA-512 user: allowed the group but not the topic, then the topic but not the group (--fatal-retry-timeout 2s), then both"}
	})
	s.produce(t, 200)
	cl := s.kafka.NewClient(t)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	user, pass := fmt.Sprintf("kafka2pg-acl-%08x", rand.Uint32()), secret("acl")
	passFile := addSCRAMUser(t, ctx, adm, user, pass)
	const other = "User:someone-else"
	grantACLs(t, ctx, adm, other, kadm.NewACLs().Topics(s.topic).Operations(kadm.OpRead, kadm.OpDescribe))
	flags := []string{"--kafka-tls-ca-file", filepath.Join(k.certDir, "ca.pem"),
		"--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-user", user, "--kafka-sasl-password-file", passFile}
	args := func(group string, extra ...string) []string {
		return bridgeArgs(k.listeners["SASL_SSL"], s.topic, s.table, slices.Concat([]string{"--pg-url", s.pgURL, "--kafka-group", group,
			"--fatal-retry-timeout", "2s"}, flags, extra)...)
	}
	secrets := []string{pass, k.password}

	t.Run("the topic denied", func(t *testing.T) {
		group := s.group + "-topic-denied"
		grantACLs(t, ctx, adm, "User:"+user, kadm.NewACLs().Groups(group).Operations(kadm.OpRead))
		notes = requireDenied(t, notes, "real-topic-denied", args(group), secrets, "TOPIC_AUTHORIZATION_FAILED", "READ and DESCRIBE on the topic",
			"kafka-acls --add --allow-principal User:"+user, "--topic "+s.topic)
		if n := countRowsIfAny(t, s); n != 0 {
			t.Errorf("%d rows of a denied topic", n)
		}
	})
	t.Run("the group denied", func(t *testing.T) {
		grantACLs(t, ctx, adm, "User:"+user, kadm.NewACLs().Topics(s.topic).Operations(kadm.OpRead, kadm.OpDescribe))
		group := s.group + "-group-denied"
		grantACLs(t, ctx, adm, other, kadm.NewACLs().Groups(group).Operations(kadm.OpRead))
		notes = requireDenied(t, notes, "real-group-denied", args(group), secrets, "GROUP_AUTHORIZATION_FAILED", "READ on the group",
			"--allow-principal User:"+user, "--group "+group)
	})
	t.Run("granted, the rows arrive", func(t *testing.T) {
		grantACLs(t, ctx, adm, "User:"+user, kadm.NewACLs().Groups(s.group).Operations(kadm.OpRead))
		b := startBridge(t, "real-granted", args(s.group, "--until-caught-up")...)
		b.requireExitZero(t, 2*time.Minute)
		s.verifyFinalState(t)
		notes = append(notes, fmt.Sprintf("granted: caught up, exit 0 after %v", b.ended.Sub(b.started).Round(100*time.Millisecond)))
		assertNoSecret(t, "the log", logOf(t, b), secrets...)
	})
}

// addSCRAMUser adds user (SCRAM-SHA-512) through adm, waits until the broker
// knows it, and returns a file that holds its password.
func addSCRAMUser(t testing.TB, ctx context.Context, adm *kadm.Client, user, pass string) string {
	t.Helper()
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pass}}); err != nil {
		t.Fatal(err)
	}
	kafkatest.Poll(t, 30*time.Second, "the SCRAM user "+user, func() (bool, string) {
		described, err := adm.DescribeUserSCRAMs(ctx, user)
		if err != nil {
			return false, err.Error()
		}
		return described.Error() == nil, fmt.Sprint(described)
	})
	return tlstest.WriteFile(t, t.TempDir(), "password", []byte(pass+"\n"))
}

// grantACLs allows principal the literal resources and operations of b.
func grantACLs(t testing.TB, ctx context.Context, adm *kadm.Client, principal string, b *kadm.ACLBuilder) {
	t.Helper()
	results, err := adm.CreateACLs(ctx, b.Allow(principal).AllowHosts().ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

// requireDenied runs the bridge with args (--fatal-retry-timeout 2s) and
// wants exit 1 after that timeout, one ERROR line with every one of want,
// and none of secrets in its log. It returns notes with what it saw.
func requireDenied(t *testing.T, notes []string, name string, args, secrets []string, want ...string) []string {
	t.Helper()
	took, out := requireExit(t, startBridge(t, name, args...), 1, time.Minute)
	requireLogHas(t, out, want...)
	if took < 2*time.Second {
		t.Errorf("exited after %v: an ACL is retried for --fatal-retry-timeout (2s) first", took)
	}
	if n := errorLines(out); n != 1 {
		t.Errorf("%d ERROR lines, want one clear one", n)
	}
	assertNoSecret(t, "the log", out, secrets...)
	return append(notes, fmt.Sprintf("%s: exit 1 after %v, %s", name, took.Round(100*time.Millisecond), want[0]))
}

// countRowsIfAny counts the scenario's rows, 0 when its table does not
// exist (yet).
func countRowsIfAny(t testing.TB, s *scenario) int {
	t.Helper()
	var exists bool
	if err := s.db.QueryRow(t.Context(), `SELECT to_regclass($1) IS NOT NULL`, "public."+s.table).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		return 0
	}
	return countRows(t, s.db, s.table)
}

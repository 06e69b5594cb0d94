package integration_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

// A broker that never answers the LeaveGroup of a stopping bridge: the stop
// must not wait for it past --shutdown-timeout, must say once that the
// member was left to expire, and must exit 0, since every row is durable.
func TestAnAbandonedLeaveExitsZeroWithOneWarning(t *testing.T) {
	s := newScenario(t, 2)
	cluster := s.kafka.FakeCluster()
	if cluster == nil {
		t.Skipf("holds the broker's LeaveGroup answers, which only kfake can: unset %s", kafkatest.BrokersEnv)
	}
	var notes []string
	reportCase(t, s, 200, func() testreport.FaultResult {
		return testreport.FaultResult{Case: "21", Name: "leave of the group unanswered at shutdown", Trials: 1, Notes: strings.Join(notes, "; "),
			Injection: "kfake holds every LeaveGroup request unanswered; SIGTERM to the bridge (--shutdown-timeout 3s) once every record is a row"}
	})
	s.produce(t, 200)
	b := s.start(t, "leave", "--shutdown-timeout", "3s")
	before := s.kafka.EndOffsets(t, s.topic)
	for p := range before {
		before[p]-- // waitProgress waits to pass it: every record durable
	}
	s.waitProgress(t, before, 30*time.Second, b)
	kafkatest.HoldRequests(t, cluster, kmsg.LeaveGroup)
	signalled := time.Now()
	b.signal(t, syscall.SIGTERM)
	_, out := requireExit(t, b, 0, 30*time.Second)
	took := b.ended.Sub(signalled)
	t.Logf("exit 0 %v after SIGTERM, with the leave unanswered", took.Round(time.Millisecond))
	notes = append(notes, fmt.Sprintf("exit %d %v after SIGTERM, %d WARN saying the data is durable and the member expires after the session timeout",
		b.state.ExitCode(), took.Round(100*time.Millisecond), strings.Count(out, "left the consumer group without waiting for the broker")))
	if took > 3*time.Second+2*time.Second {
		t.Errorf("the stop took %v, want within --shutdown-timeout 3s and some slack", took)
	}
	if n := strings.Count(out, "left the consumer group without waiting for the broker"); n != 1 {
		t.Errorf("%d warnings of the abandoned leave, want 1; log:\n%s", n, out)
	}
	if strings.Contains(out, "graceful stop cut short") {
		t.Errorf("the abandoned leave was reported twice; log:\n%s", out)
	}
	if n := countRows(t, s.db, s.table); n != 200 {
		t.Errorf("%d rows after the stop, want 200", n)
	}
}

package reader

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/trouble"
)

// FatalError is what Run returns when something that retrying cannot fix
// has lasted FatalRetryTimeout: credentials or a privilege the broker or
// Postgres refuses, a topic that does not exist, a certificate that does
// not verify. Its message says what to fix.
type FatalError struct {
	What string        // what failed, e.g. `topic "orders"`, `the consumer group "g"`, `writes to orders/3`
	Err  error         // the last error
	For  time.Duration // how long it failed before the reader gave up; 0 when no retry could mend it
	Fix  string        // what the operator should do; empty when only Err can say
}

func (e *FatalError) Error() string {
	msg := fmt.Sprintf("%s: %v", e.What, e.Err)
	if e.For > 0 {
		msg += fmt.Sprintf(" (failing for %s, see reader.Config.FatalRetryTimeout)", e.For.Round(100*time.Millisecond))
	}
	if e.Fix != "" {
		msg += ": " + e.Fix
	}
	return msg
}

func (e *FatalError) Unwrap() error { return e.Err }

// aclNames are the principal, the topic and the group that an ACL to grant
// names; empty: unknown, the fix then says User:NAME, TOPIC or GROUP.
type aclNames struct{ principal, topic, group string }

// kafkaFix returns what to fix when err, from the Kafka client, will not
// heal by retrying; ok is false for trouble that may (a broker down, a
// leader moving). literal says the topic was named, not matched by a regex:
// then its absence is an error. An ACL to grant names the topic and the
// group of names.
func kafkaFix(err error, literal bool, names aclNames) (fix string, ok bool) {
	principal, topic, group := cmp.Or(names.principal, "User:NAME"), cmp.Or(names.topic, "TOPIC"), cmp.Or(names.group, "GROUP")
	if hint := securityHint(err, Security{}, false); hint != "" {
		return hint, true
	}
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return fmt.Sprintf("the broker denies this principal the topic: grant it READ and DESCRIBE on the topic (kafka-acls --add --allow-principal %s --operation Read --operation Describe --topic %s)", principal, topic), true
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		return fmt.Sprintf("the broker denies this principal the consumer group: grant it READ on the group (kafka-acls --add --allow-principal %s --operation Read --group %s)", principal, group), true
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "the broker denies this principal a cluster operation: grant it DESCRIBE on the cluster", true
	case literal && (errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID)):
		return "the topic does not exist (or this principal may not describe it): create it, or correct reader.Config.Topics", true
	}
	return "", false
}

// fatalWatch follows the failures that are fatal once they last: for each
// subject (a topic, the group, a partition's writes) when its streak
// began. A subject's streak ends when it shows that it works again.
type fatalWatch struct {
	timeout time.Duration
	now     func() time.Time

	mu    sync.Mutex
	since map[string]time.Time // when each subject's streak began
	last  map[string]time.Time // when it last failed
	err   *FatalError          // the first that lasted; set once
	done  chan struct{}        // closed when err is set
}

// streakQuiet is how long a subject must go without failing before its
// next failure starts a new streak.
const streakQuiet = time.Minute

func newFatalWatch(timeout time.Duration) *fatalWatch {
	return &fatalWatch{timeout: timeout, now: time.Now, since: make(map[string]time.Time), last: make(map[string]time.Time),
		done: make(chan struct{})}
}

// failed records that subject failed with err, which fix describes, and
// reports whether the failure has now lasted the timeout (the reader then
// stops: Run returns the error).
func (w *fatalWatch) failed(subject string, err error, fix string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	first, ok := w.since[subject]
	// A subject quiet for a while starts a new streak: some failures are
	// reported now and then and never followed by a sign of success. The
	// while is longer than the client's own backoff between reports (a
	// group join is retried every 5 s at most): a streak reported every
	// few seconds must not start again at each report.
	if !ok || now.Sub(w.last[subject]) >= max(w.timeout, streakQuiet) {
		w.since[subject] = now
		first = now
	}
	w.last[subject] = now
	if now.Sub(first) < w.timeout {
		return false
	}
	if w.err == nil {
		w.err = &FatalError{What: subject, Err: err, For: now.Sub(first), Fix: fix}
		close(w.done)
	}
	return true
}

// stop stops the reader at once with err, unless an error stopped it
// already: for what no retry can mend.
func (w *fatalWatch) stop(err *FatalError) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
		close(w.done)
	}
}

// ok ends subject's streak.
func (w *fatalWatch) ok(subject string) {
	w.mu.Lock()
	delete(w.since, subject)
	delete(w.last, subject)
	w.mu.Unlock()
}

// fatal returns the error that stopped the reader, or nil.
func (w *fatalWatch) fatal() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return nil
	}
	return w.err
}

// Subjects of the fatal watch.
func topicSubject(topic string) string { return fmt.Sprintf("topic %q", topic) }
func (r *Reader) groupSubject() string { return fmt.Sprintf("the consumer group %q", r.cfg.Group) }
func writesSubject(tp TopicPartition) string {
	return fmt.Sprintf("writes to Postgres of %s/%d", tp.Topic, tp.Partition)
}

// noteFetchError sorts an error that a poll returned for topic (empty: the
// group) and partition: trouble that may heal is logged, rate-limited;
// trouble that will not is logged at once and counted towards a fatal
// stop.
func (r *Reader) noteFetchError(topic string, partition int32, err error) {
	subject, literal := topicSubject(topic), !r.cfg.TopicsAreRegex
	var gs *kgo.ErrGroupSession
	if topic == "" || errors.As(err, &gs) {
		subject, literal = r.groupSubject(), false
	}
	fix, fatal := kafkaFix(err, literal, aclNames{r.cfg.Principal, topic, r.cfg.Group})
	if !fatal {
		r.fetchTrouble.Fail(err, "topic", topic, "partition", partition)
		return
	}
	if r.fatal.failed(subject, err, fix) {
		return // Run returns it
	}
	r.refusedTrouble.Fail(err, "subject", subject, "fix", fix, "fatal_retry_timeout", r.cfg.FatalRetryTimeout)
}

// kafkaHealth is the client hook that follows the connections to the
// brokers: a connection that fails is logged (rate-limited, with the time
// since a broker last answered), and a certificate that does not verify
// counts towards a fatal stop; any answer ends the streak.
type kafkaHealth struct{ r *Reader }

// connSubject is the fatal watch's subject for the connections to Kafka.
const connSubject = "the connection to Kafka"

func (h kafkaHealth) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		return
	}
	broker := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	if fix, fatal := kafkaFix(err, false, aclNames{principal: h.r.cfg.Principal, group: h.r.cfg.Group}); fatal {
		if h.r.fatal.failed(connSubject, err, fix) {
			h.r.wake()
			return
		}
		h.r.refusedTrouble.Fail(err, "broker", broker, "fix", fix)
		return
	}
	h.r.connTrouble.Fail(err, "broker", broker)
}

func (h kafkaHealth) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		h.r.connTrouble.OK()
		h.r.fatal.ok(connSubject)
	}
}

// Trouble describes what fails now, one line a thing: the connections to
// Kafka, the polls, each partition's writes to Postgres. Empty when
// nothing does.
func (r *Reader) Trouble() []string {
	var out []string
	describe := func(what string, st trouble.State) {
		if st.Failing {
			out = append(out, fmt.Sprintf("%s: %v (%d failures in %s)", what, st.LastErr, st.Failures,
				time.Since(st.FailingSince).Round(time.Second)))
		}
	}
	describe("kafka", r.connTrouble.State())
	describe("kafka fetch", r.fetchTrouble.State())
	describe("kafka", r.refusedTrouble.State())
	parts := r.ownedPartitions()
	for _, p := range parts {
		describe(fmt.Sprintf("postgres writes of %s/%d", p.tp.Topic, p.tp.Partition), p.trouble.State())
	}
	slices.Sort(out)
	return out
}

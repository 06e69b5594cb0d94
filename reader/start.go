package reader

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/stream"
)

// StartPolicy says where a partition begins when Postgres holds no position
// for it yet. The zero value is StartEarliest.
type StartPolicy struct {
	Kind StartKind
	At   time.Time // for StartAtTime
}

// StartKind enumerates the start policies.
type StartKind int

const (
	StartEarliest  StartKind = iota // the first offset still in the log
	StartLatest                     // only records produced after the claim
	StartCommitted                  // adopt the Kafka group's committed offset once; earliest if none
	StartAtTime                     // the first record at or after At
)

// ParseStart reads a start policy: earliest, latest, committed, or an RFC
// 3339 time.
func ParseStart(s string) (StartPolicy, error) {
	switch s {
	case "", "earliest":
		return StartPolicy{Kind: StartEarliest}, nil
	case "latest":
		return StartPolicy{Kind: StartLatest}, nil
	case "committed":
		return StartPolicy{Kind: StartCommitted}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return StartPolicy{}, fmt.Errorf("%q is not earliest, latest, committed or an RFC 3339 time such as 2026-11-30T09:00:00Z", s)
	}
	return StartPolicy{Kind: StartAtTime, At: t}, nil
}

func (p StartPolicy) String() string {
	switch p.Kind {
	case StartLatest:
		return "latest"
	case StartCommitted:
		return "committed"
	case StartAtTime:
		return p.At.Format(time.RFC3339Nano)
	}
	return "earliest"
}

func (p StartPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func (p *StartPolicy) UnmarshalText(b []byte) (err error) {
	*p, err = ParseStart(string(b))
	return err
}

func (p StartPolicy) validate() error {
	if p.Kind < StartEarliest || p.Kind > StartAtTime {
		return stream.FieldErrorf("reader.Config.Start", "unknown policy %d", p.Kind)
	}
	return nil
}

// offset turns the policy into a franz-go offset; kafkaCommit is what the
// group has committed (or the client's start offset when nothing is).
func (p StartPolicy) offset(kafkaCommit kgo.Offset) kgo.Offset {
	switch p.Kind {
	case StartLatest:
		return kgo.NewOffset().AtEnd()
	case StartCommitted:
		return kafkaCommit
	case StartAtTime:
		return kgo.NewOffset().AfterMilli(p.At.UnixMilli())
	}
	return kgo.NewOffset().AtStart()
}

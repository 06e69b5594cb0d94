package reader

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/enum"
)

// The reader's closed sets of settings. Each zero value is the default;
// each reads and writes its name as text (flags, config files).

// IsolationLevel is which records of transactional producers are read.
type IsolationLevel int

const (
	// ReadCommitted reads committed records only, up to the last stable
	// offset: what an aborted transaction wrote is never written.
	ReadCommitted IsolationLevel = iota
	// ReadUncommitted reads every record, up to the high watermark.
	ReadUncommitted
)

var isolationNames = enum.Names{"read_committed", "read_uncommitted"}

func (l IsolationLevel) String() string { return isolationNames.Name(int(l), "IsolationLevel") }

// ParseIsolationLevel reads read_committed or read_uncommitted.
func ParseIsolationLevel(s string) (IsolationLevel, error) {
	v, err := isolationNames.Parse(s)
	return IsolationLevel(v), err
}

func (l IsolationLevel) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

func (l *IsolationLevel) UnmarshalText(b []byte) (err error) {
	*l, err = ParseIsolationLevel(string(b))
	return err
}

// GroupProtocol is how the group's members share the partitions.
type GroupProtocol int

const (
	// GroupProtocolClassic: the members assign, with Config.Balancers.
	GroupProtocolClassic GroupProtocol = iota
	// GroupProtocolConsumer: the broker assigns, incrementally (KIP-848,
	// Kafka 4.0 or newer), with its uniform (sticky) or range assignor.
	GroupProtocolConsumer
)

var groupProtocolNames = enum.Names{"classic", "consumer"}

func (p GroupProtocol) String() string { return groupProtocolNames.Name(int(p), "GroupProtocol") }

// ParseGroupProtocol reads classic or consumer.
func ParseGroupProtocol(s string) (GroupProtocol, error) {
	v, err := groupProtocolNames.Parse(s)
	return GroupProtocol(v), err
}

func (p GroupProtocol) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func (p *GroupProtocol) UnmarshalText(b []byte) (err error) {
	*p, err = ParseGroupProtocol(string(b))
	return err
}

// OnDataLoss is what a partition does when retention deleted records
// before they were read.
type OnDataLoss int

const (
	// OnDataLossStop stops the partition with an error naming the lost
	// range.
	OnDataLossStop OnDataLoss = iota
	// OnDataLossSkip logs the range and goes on at the log start.
	OnDataLossSkip
)

var onDataLossNames = enum.Names{"stop", "skip"}

func (o OnDataLoss) String() string { return onDataLossNames.Name(int(o), "OnDataLoss") }

// ParseOnDataLoss reads stop or skip.
func ParseOnDataLoss(s string) (OnDataLoss, error) {
	v, err := onDataLossNames.Parse(s)
	return OnDataLoss(v), err
}

func (o OnDataLoss) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

func (o *OnDataLoss) UnmarshalText(b []byte) (err error) {
	*o, err = ParseOnDataLoss(string(b))
	return err
}

// Balancer is a client-side assignor of the classic group protocol.
type Balancer int

const (
	// CooperativeSticky moves as few partitions as it can, and only
	// those: the others keep being written through a rebalance.
	CooperativeSticky Balancer = iota
	// Sticky moves as few partitions as it can, in an eager rebalance.
	Sticky
	// Range gives each member a range of each topic's partitions.
	Range
	// RoundRobin deals the partitions out in turn.
	RoundRobin
)

var balancerNames = enum.Names{"cooperative-sticky", "sticky", "range", "round-robin"}

func (b Balancer) String() string { return balancerNames.Name(int(b), "Balancer") }

// ParseBalancer reads cooperative-sticky, sticky, range or round-robin.
func ParseBalancer(s string) (Balancer, error) {
	v, err := balancerNames.Parse(s)
	return Balancer(v), err
}

func (b Balancer) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

func (b *Balancer) UnmarshalText(text []byte) (err error) {
	*b, err = ParseBalancer(string(text))
	return err
}

// kgo is franz-go's balancer of b.
func (b Balancer) kgo() kgo.GroupBalancer {
	switch b {
	case Sticky:
		return kgo.StickyBalancer()
	case Range:
		return kgo.RangeBalancer()
	case RoundRobin:
		return kgo.RoundRobinBalancer()
	}
	return kgo.CooperativeStickyBalancer()
}

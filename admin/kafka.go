package admin

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/reader"
)

// Kafka is how an action reaches the brokers: the same security options
// as the bridge's reader (TLS, SASL).
type Kafka struct {
	// Brokers are the seed brokers (bootstrap.servers); none: the action
	// does without Kafka where it can (Status), or fails.
	Brokers []string
	// Security is the TLS and SASL of the connection, as reader.Config
	// takes it.
	Security reader.Security
	// ClientID is the client.id the brokers see; empty: kafka2pg-admin.
	ClientID string
}

// Options are the kgo options of a client of k: seed brokers, client id,
// TLS and SASL.
func (k Kafka) Options() ([]kgo.Opt, error) {
	opts, err := k.Security.Options()
	if err != nil {
		return nil, err
	}
	id := k.ClientID
	if id == "" {
		id = "kafka2pg-admin"
	}
	return append(opts, kgo.SeedBrokers(k.Brokers...), kgo.ClientID(id)), nil
}

// Client is an admin client of k's brokers; close releases it.
func (k Kafka) Client() (adm *kadm.Client, close func(), err error) {
	opts, err := k.Options()
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka client of %v: %w", k.Brokers, err)
	}
	return kadm.NewClient(cl), cl.Close, nil
}

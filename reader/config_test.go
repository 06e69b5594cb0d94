package reader

import (
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{Brokers: []string{"127.0.0.1:9092"}, Group: "g", Topics: []string{"t"}}
}

func TestValidateNamesTheFlagOfEachBadValue(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		flag   string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "--kafka-brokers"},
		{"a broker without a port", func(c *Config) { c.Brokers = []string{"localhost"} }, "--kafka-brokers"},
		{"no group", func(c *Config) { c.Group = "" }, "--kafka-group"},
		{"no topic", func(c *Config) { c.Topics = nil }, "--topic"},
		{"an empty topic", func(c *Config) { c.Topics = []string{""} }, "--topic"},
		{"an unknown balancer", func(c *Config) { c.Balancers = []string{"fair"} }, "--kafka-balancers"},
		{"cooperative mixed with eager", func(c *Config) { c.Balancers = []string{"cooperative-sticky", "range"} }, "--kafka-balancers"},
		{"an unknown isolation level", func(c *Config) { c.IsolationLevel = "serializable" }, "--kafka-isolation-level"},
		{"partition bytes above fetch bytes", func(c *Config) { c.FetchMaxBytes, c.FetchMaxPartitionBytes = 1000, 2000 }, "--kafka-fetch-max-partition-bytes"},
		{"a negative fetch wait", func(c *Config) { c.FetchMaxWait = -time.Second }, "--kafka-fetch-max-wait"},
		{"heartbeat not below session timeout", func(c *Config) { c.HeartbeatInterval, c.SessionTimeout = 10*time.Second, 6*time.Second }, "--kafka-heartbeat-interval"},
		{"negative batch rows", func(c *Config) { c.BatchMaxRows = -1 }, "--batch-max-rows"},
		{"negative batch bytes", func(c *Config) { c.BatchMaxBytes = -1 }, "--batch-max-bytes"},
		{"a queue smaller than a batch", func(c *Config) { c.BatchMaxRows, c.QueueCapacity = 100, 10 }, "--queue-capacity"},
		{"a negative commit interval", func(c *Config) { c.CommitInterval = -1 }, "--kafka-commit-interval"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := validConfig()
			c.mutate(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), c.flag) {
				t.Errorf("Validate() = %v, want an error naming %s", err, c.flag)
			}
		})
	}
	if err := validConfig().Validate(); err != nil {
		t.Errorf("a valid config was refused: %v", err)
	}
}

func TestParseStartAcceptsPoliciesAndTimes(t *testing.T) {
	for _, s := range []string{"earliest", "latest", "committed", "2026-11-30T09:00:00Z"} {
		p, err := ParseStart(s)
		if err != nil || p.String() != s {
			t.Errorf("ParseStart(%q) = %v, %v", s, p, err)
		}
	}
	if _, err := ParseStart("yesterday"); err == nil || !strings.Contains(err.Error(), "--kafka-start") {
		t.Errorf("ParseStart(yesterday) = %v, want an error naming --kafka-start", err)
	}
}

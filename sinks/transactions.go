package sinks

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/ingest"
)

// A debezium sink with transactions: true applies its source's
// transactions whole (package ingest's Transactions and Applier). The
// source is named by its transaction topic, Debezium's
// <topic.prefix>.transaction: transaction_topic, or the topic.prefix
// read from the sink's topic (its first dot-separated part) or from the
// literal start of its topic_regex ('shop\.public\..*' gives shop). The
// transaction topic joins the subscription with a sink of its own, and
// the sinks of one source share it and its on_incomplete.

// transactionTopic is the transaction topic of sc, a sink with
// transactions.
func transactionTopic(sc Sink) (string, error) {
	if sc.TransactionTopic != "" {
		return sc.TransactionTopic, nil
	}
	name := sc.Topic
	if sc.TopicRegex != "" {
		re, err := regexp.Compile("^(?:" + sc.TopicRegex + ")$")
		if err != nil {
			return "", keyErr("topic_regex", err)
		}
		name, _ = re.LiteralPrefix()
	}
	prefix, _, ok := strings.Cut(name, ".")
	if !ok || prefix == "" {
		what := fmt.Sprintf("topic %q", sc.Topic)
		if sc.TopicRegex != "" {
			what = fmt.Sprintf("topic_regex %q", sc.TopicRegex)
		}
		return "", keyErr("transaction_topic", fmt.Errorf("transactions: the connector's topic.prefix cannot be read from %s (it starts no <prefix>.<schema>.<table> name): name the transaction topic in transaction_topic, e.g. <topic.prefix>.transaction", what))
	}
	return prefix + ".transaction", nil
}

// checkTransactions refuses the transaction keys where they do not
// apply.
func checkTransactions(sc Sink) []error {
	var errs []error
	if !sc.Transactions {
		for key, set := range map[string]bool{"transaction_topic": sc.TransactionTopic != "", "on_incomplete": sc.OnIncomplete != "", "incomplete_timeout": sc.IncompleteTimeout != "",
			"retain_ends": sc.RetainEnds != 0, "orphan_after": sc.OrphanAfter != ""} {
			if set {
				errs = append(errs, keyErr(key, fmt.Errorf("%s is for transactions: true: set it, or remove %s", key, key)))
			}
		}
		return errs
	}
	if sc.Format != formatDebezium {
		errs = append(errs, keyErr("transactions", fmt.Errorf("transactions: true needs format debezium: only Debezium's change events carry the transaction block (provide.transaction.metadata=true); remove transactions, or set format: debezium")))
	}
	if sc.ValueFormat != "" && sc.ValueFormat != "json" {
		errs = append(errs, keyErr("transactions", fmt.Errorf("transactions: true reads the transaction topic's records as JSON, and value_format %s is Confluent's: use the JsonConverter for the transaction topic and value_format json", sc.ValueFormat)))
	}
	if sc.Where != "" {
		errs = append(errs, keyErr("where", errors.New("where with transactions: true: a source transaction's END counts every event, so one where drops would hold the transaction and every later one back for ever; remove where, or filter in the connector (table.include.list) so that the END does not count it")))
	}
	if len(sc.Children) > 0 {
		errs = append(errs, keyErr("children", errors.New("children with transactions: true: a source transaction's apply writes its events' rows, not their children, yet; remove children or transactions")))
	}
	if _, err := parseApplier(sc); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// parseApplier reads on_incomplete, incomplete_timeout, retain_ends and
// orphan_after.
func parseApplier(sc Sink) (ingest.ApplierConfig, error) {
	var cfg ingest.ApplierConfig
	if sc.OnIncomplete != "" {
		v, err := ingest.ParseOnIncomplete(sc.OnIncomplete)
		if err != nil {
			return cfg, keyErr("on_incomplete", fmt.Errorf("on_incomplete %q is not wait or apply: wait holds the transaction and every later one until its events arrive; apply applies what arrived after incomplete_timeout", sc.OnIncomplete))
		}
		cfg.OnIncomplete = v
	}
	if sc.IncompleteTimeout != "" {
		d, err := time.ParseDuration(sc.IncompleteTimeout)
		if err != nil || d <= 0 {
			return cfg, keyErr("incomplete_timeout", fmt.Errorf("incomplete_timeout %q is not a positive duration such as 5m", sc.IncompleteTimeout))
		}
		if cfg.OnIncomplete != ingest.IncompleteApply {
			return cfg, keyErr("incomplete_timeout", errors.New("incomplete_timeout is for on_incomplete: apply; on_incomplete wait never times out"))
		}
		cfg.IncompleteTimeout = d
	}
	if sc.RetainEnds < 0 {
		return cfg, keyErr("retain_ends", fmt.Errorf("retain_ends %d is negative: give how many offsets of the transaction topic an applied END is kept for (default 1000000), more than a restarted connector sends again", sc.RetainEnds))
	}
	cfg.RetainEnds = sc.RetainEnds
	if sc.OrphanAfter != "" {
		d, err := time.ParseDuration(sc.OrphanAfter)
		if err != nil || d <= 0 {
			return cfg, keyErr("orphan_after", fmt.Errorf("orphan_after %q is not a positive duration such as 1h", sc.OrphanAfter))
		}
		cfg.OrphanAfter = d
	}
	return cfg, nil
}

// transactionTopics are the transaction topics of c's sinks, to
// subscribe to.
func (c Config) transactionTopics() []string {
	var out []string
	for _, sc := range c.Sinks {
		if !sc.Transactions || sc.Format != formatDebezium {
			continue
		}
		if t, err := transactionTopic(sc); err == nil && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// addTransactionTopics gives each transaction topic of c its sink and
// its Applier in set.
func (c Config) addTransactionTopics(set *Set) []error {
	var errs []error
	by := map[string]int{} // transaction topic -> index of its sink in c.Sinks
	for i, sc := range c.Sinks {
		if !sc.Transactions || sc.Format != formatDebezium {
			continue
		}
		at := func(err error) error { return fieldErrors(fmt.Sprintf("sinks[%d]", i), sc.Line, err) }
		topic, err := transactionTopic(sc)
		if err != nil {
			continue // the sink's build said so
		}
		acfg, err := parseApplier(sc)
		if err != nil {
			continue // the sink's check said so
		}
		if j, seen := by[topic]; seen {
			first := c.Sinks[j]
			if first.OnIncomplete != sc.OnIncomplete || first.IncompleteTimeout != sc.IncompleteTimeout {
				errs = append(errs, at(keyErr("on_incomplete", fmt.Errorf("the sinks of transaction topic %q disagree on on_incomplete and incomplete_timeout (sinks[%d] has %q and %q): one source applies one way; give them the same", topic, j, first.OnIncomplete, first.IncompleteTimeout))))
			}
			if first.RetainEnds != sc.RetainEnds || first.OrphanAfter != sc.OrphanAfter {
				errs = append(errs, at(keyErr("retain_ends", fmt.Errorf("the sinks of transaction topic %q disagree on retain_ends and orphan_after (sinks[%d] has %d and %q): one source keeps one way; give them the same", topic, j, first.RetainEnds, first.OrphanAfter))))
			}
			continue
		}
		by[topic] = i
		if _, taken := set.Fixed[topic]; taken {
			errs = append(errs, at(keyErr("transaction_topic", fmt.Errorf("transaction topic %q has a sink of its own: with transactions: true kafka2pg reads it itself; remove that sink", topic))))
			continue
		}
		set.Fixed[topic] = ingest.BoundariesSink(ingest.Boundaries{Source: topic, Parse: cdc.ParseBoundary})
		acfg.Source = topic
		set.Appliers = append(set.Appliers, acfg)
	}
	return errs
}

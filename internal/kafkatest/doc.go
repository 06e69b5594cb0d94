// Package kafkatest gives tests a Kafka cluster to talk to, and the few
// questions tests ask of it: create a topic, produce records, list end
// offsets, read and reset a consumer group's committed offsets, wait for a
// group to settle.
//
// By default [New] starts an in-process kfake cluster (one broker, listening
// on a random 127.0.0.1 port) that lives until the test ends; subprocesses
// such as the kafka2pg binary reach it over TCP through [Kafka.Brokers].
// When KAFKA2PG_TEST_BROKERS is set (comma-separated host:port), New uses
// that real broker instead. Both modes take the same path afterwards: topics
// are created through the admin API with a random suffix, so tests never
// share a topic and never depend on a seeded one.
//
// Every helper that takes a testing.TB fails the test with the operation
// that broke; [Kafka.TryProduce] returns an error instead, for producer
// goroutines that may not call t.Fatal.
//
// Goroutines: kfake owns its own; the package's kgo client owns its own.
// Both are closed by t.Cleanup when the test ends.
package kafkatest

#!/usr/bin/env bash
# kafka-tool.sh CLASS [ARGS...] runs a Kafka command-line tool from the jars
# of scripts/kafka-up.sh (.tmp/kafka/libs, fetched with Maven when missing),
# with only warnings and errors logged, on stderr (kafka/tools-log4j2.properties).
#
# CLASS is a main class, or one of these short names:
#   TopicCommand, ConsumerGroupCommand, ShareGroupCommand, GroupsCommand,
#   MetadataQuorumCommand, GetOffsetShell, DeleteRecordsCommand,
#   TransactionsCommand, LeaderElectionCommand, LogDirsCommand, ClusterTool,
#   FeatureCommand, BrokerApiVersionsCommand, ProducerPerformance,
#   ConsumerPerformance, ConsoleProducer, ConsoleConsumer, StorageTool
#
# For example:
#   b=$(cat .tmp/kafka/brokers)
#   scripts/kafka-tool.sh TopicCommand --bootstrap-server "$b" --create --topic events --partitions 8
#   scripts/kafka-tool.sh ConsumerGroupCommand --bootstrap-server "$b" --describe --group kafka2pg
#   scripts/kafka-tool.sh MetadataQuorumCommand --bootstrap-server "$b" describe --status
# Extra JVM options: $KAFKA_TOOL_OPTS.
set -euo pipefail

prog=kafka-tool
# shellcheck source=kafka/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../kafka/lib.sh"

if [ "$#" -lt 1 ]; then
	sed -n '2,19s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
fi
class=$1
shift

case "$class" in
*.*) ;;
ConsumerGroupCommand | ShareGroupCommand) class=org.apache.kafka.tools.consumer.group.$class ;;
ConsoleConsumer) class=org.apache.kafka.tools.consumer.ConsoleConsumer ;;
StorageTool) class=kafka.tools.StorageTool ;;
*) class=org.apache.kafka.tools.$class ;;
esac

check_java
# Any complete copy will do (a cluster may run another version than the
# pom's); fetch only when there is none.
if [ ! -f "$libs/.complete" ]; then
	take_lock 900
	ensure_libs
	exec 9>&-
fi

# Short-lived: the client JIT tier only and a small serial-GC heap start
# faster than the broker's settings.
# shellcheck disable=SC2086 # KAFKA_TOOL_OPTS is a list of flags
exec "$java_bin" -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
	"-Dlog4j2.configurationFile=$kafka_src/tools-log4j2.properties" ${KAFKA_TOOL_OPTS:-} \
	-cp "$libs/*" "$class" "$@"

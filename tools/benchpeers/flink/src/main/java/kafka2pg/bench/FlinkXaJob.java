package kafka2pg.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.sql.Types;
import java.util.HashMap;
import java.util.Map;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.jdbc.JdbcExactlyOnceOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.connector.jdbc.core.datastream.sink.JdbcSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.postgresql.xa.PGXADataSource;

/**
 * Reads the bench's Kafka Connect JSON records from one topic and writes
 * their 12 payload fields to a Postgres table with Flink's exactly-once JDBC
 * sink (XA two-phase commit bound to checkpoints), in a local MiniCluster.
 *
 * <p>Arguments are key=value: brokers, topic, group, jdbc (a
 * jdbc:postgresql:// URL without credentials), user, password, table, mode
 * (append or upsert: INSERT ... ON CONFLICT (id) DO UPDATE), parallelism,
 * checkpoint-ms, checkpoint-dir (a file:// URI; checkpoints are retained on
 * cancellation and on a crash) and, to resume after a crash, restore (the
 * path of a retained checkpoint). Without restore the source starts from
 * the group's committed offsets, else from the earliest: the plain restart
 * a user without the checkpoint's path gets.
 */
public final class FlinkXaJob {
  /** The 12 fields of a record, in the table's column order. */
  static final String[] COLUMNS = {
    "id", "seq", "user_id", "event", "amount", "currency", "country", "ts", "page", "referrer",
    "device", "session"
  };

  /** One record's payload; a POJO, so Flink serializes it field by field. */
  public static final class Event {
    public long id;
    public long seq;
    public String userId;
    public String event;
    public Double amount;
    public String currency;
    public String country;
    public long tsMillis;
    public String page;
    public String referrer;
    public String device;
    public String session;

    public Event() {}
  }

  /** Parses the JSON envelope's payload. */
  static final class Parse extends RichMapFunction<String, Event> {
    private transient ObjectMapper mapper;

    @Override
    public void open(org.apache.flink.api.common.functions.OpenContext ctx) {
      mapper = new ObjectMapper();
    }

    @Override
    public Event map(String value) throws Exception {
      JsonNode p = mapper.readTree(value).get("payload");
      Event e = new Event();
      e.id = p.get("id").asLong();
      e.seq = p.get("seq").asLong();
      e.userId = text(p, "user_id");
      e.event = text(p, "event");
      JsonNode amount = p.get("amount");
      e.amount = amount == null || amount.isNull() ? null : amount.asDouble();
      e.currency = text(p, "currency");
      e.country = text(p, "country");
      e.tsMillis = p.get("ts").asLong();
      e.page = text(p, "page");
      e.referrer = text(p, "referrer");
      e.device = text(p, "device");
      e.session = text(p, "session");
      return e;
    }

    private static String text(JsonNode p, String name) {
      JsonNode n = p.get(name);
      return n == null || n.isNull() ? null : n.asText();
    }
  }

  static void bind(PreparedStatement ps, Event e) throws SQLException {
    ps.setLong(1, e.id);
    ps.setLong(2, e.seq);
    ps.setString(3, e.userId);
    ps.setString(4, e.event);
    if (e.amount == null) {
      ps.setNull(5, Types.DOUBLE);
    } else {
      ps.setDouble(5, e.amount);
    }
    ps.setString(6, e.currency);
    ps.setString(7, e.country);
    ps.setTimestamp(8, new Timestamp(e.tsMillis));
    ps.setString(9, e.page);
    ps.setString(10, e.referrer);
    ps.setString(11, e.device);
    ps.setString(12, e.session);
  }

  /** The statement of a mode; the table name comes quoted from the harness's rules. */
  static String statement(String table, String mode) {
    String quoted = "\"" + table.replace("\"", "\"\"") + "\"";
    StringBuilder sql = new StringBuilder("INSERT INTO ").append(quoted).append(" (");
    sql.append(String.join(", ", COLUMNS)).append(") VALUES (");
    sql.append("?, ".repeat(COLUMNS.length - 1)).append("?)");
    if (mode.equals("upsert")) {
      sql.append(" ON CONFLICT (id) DO UPDATE SET ");
      for (int i = 1; i < COLUMNS.length; i++) {
        if (i > 1) {
          sql.append(", ");
        }
        sql.append(COLUMNS[i]).append(" = EXCLUDED.").append(COLUMNS[i]);
      }
    } else if (!mode.equals("append")) {
      throw new IllegalArgumentException("mode=" + mode + ": use append or upsert");
    }
    return sql.toString();
  }

  static Map<String, String> parseArgs(String[] args) {
    Map<String, String> m = new HashMap<>();
    for (String a : args) {
      int eq = a.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("argument " + a + ": want key=value");
      }
      m.put(a.substring(0, eq), a.substring(eq + 1));
    }
    return m;
  }

  static String need(Map<String, String> m, String key) {
    String v = m.get(key);
    if (v == null || v.isEmpty()) {
      throw new IllegalArgumentException("missing argument " + key + "=...");
    }
    return v;
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> a = parseArgs(args);
    String brokers = need(a, "brokers");
    String topic = need(a, "topic");
    String group = need(a, "group");
    String jdbc = need(a, "jdbc");
    String user = need(a, "user");
    String password = a.getOrDefault("password", "");
    String table = need(a, "table");
    String mode = a.getOrDefault("mode", "append");
    int parallelism = Integer.parseInt(a.getOrDefault("parallelism", "2"));
    long checkpointMs = Long.parseLong(a.getOrDefault("checkpoint-ms", "1000"));
    int batch = Integer.parseInt(a.getOrDefault("batch", "5000"));
    String restore = a.get("restore");

    Configuration conf = new Configuration();
    // Flink 2.0 reads the directory under its 1.x key (the notes' run
    // retained its checkpoints with it); the 2.x key is set as well.
    conf.setString("state.checkpoints.dir", need(a, "checkpoint-dir"));
    conf.setString("execution.checkpointing.dir", need(a, "checkpoint-dir"));
    conf.setString("execution.checkpointing.storage", "filesystem");
    conf.setString(
        "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
    if (restore != null && !restore.isEmpty()) {
      conf.setString("execution.state-recovery.path", restore);
    }
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
    env.setParallelism(parallelism);
    env.enableCheckpointing(checkpointMs, CheckpointingMode.EXACTLY_ONCE);

    KafkaSource<String> source =
        KafkaSource.<String>builder()
            .setBootstrapServers(brokers)
            .setTopics(topic)
            .setGroupId(group)
            .setStartingOffsets(OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST))
            .setProperty("isolation.level", "read_committed")
            .setProperty("session.timeout.ms", a.getOrDefault("session-timeout-ms", "45000"))
            .setValueOnlyDeserializer(new SimpleStringSchema())
            .build();

    // An append batch is one multi-row INSERT (reWriteBatchedInserts); an
    // upsert batch stays one statement per record, since a multi-row
    // INSERT ... ON CONFLICT DO UPDATE fails when a key is twice in it.
    boolean rewrite = mode.equals("append");
    JdbcSink<Event> sink =
        JdbcSink.<Event>builder()
            .withQueryStatement(statement(table, mode), FlinkXaJob::bind)
            .withExecutionOptions(
                JdbcExecutionOptions.builder()
                    .withBatchSize(batch)
                    .withBatchIntervalMs(200)
                    // The XA writer refuses retries (FLINK-22311).
                    .withMaxRetries(0)
                    .build())
            .buildExactlyOnce(
                // Postgres allows one XA transaction per connection.
                JdbcExactlyOnceOptions.builder().withTransactionPerConnection(true).build(),
                () -> {
                  PGXADataSource ds = new PGXADataSource();
                  ds.setUrl(jdbc);
                  ds.setUser(user);
                  ds.setPassword(password);
                  ds.setReWriteBatchedInserts(rewrite);
                  return ds;
                });

    env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka")
        .map(new Parse())
        .name("parse")
        .sinkTo(sink)
        .name("jdbc-xa");
    env.execute("kafka2pg-bench-flink-xa");
  }
}

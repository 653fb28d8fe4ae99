package exactly.bench.kstreams;

import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * One instance of the cluster benchmark's job on Kafka Streams
 * (bench/cmd/cluster-bench, issue 30), the topology of
 * bench/cmd/exactly-cluster: records "user:item" keyed by user, with their
 * record timestamp as event time, re-keyed by item through one repartition
 * topic, counted per item in tumbling windows (grace 200 ms, the exactly
 * job's out-of-orderness bound), each window's count emitted once, when it
 * closes, as "item:windowStartMillis:count" keyed by item. exactly_once_v2,
 * commits every --interval-ms, one stream thread, no record cache, dynamic
 * group membership (as exactly's instances), the group's session timeout
 * --session-ms. Every instance runs the same command with its own
 * --state-dir; SIGTERM closes it cleanly.
 *
 * <pre>java -cp 'target/classes:target/lib/*' exactly.bench.kstreams.ClusterBench \
 *   --brokers 127.0.0.1:9092 --in in --out out --app-id bench --state-dir /tmp/ks-1</pre>
 */
public final class ClusterBench {
    private ClusterBench() {}

    public static void main(String[] argv) throws InterruptedException {
        Map<String, String> a = Main.flags(argv, "brokers", "in", "out", "app-id", "state-dir");
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, a.get("app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("brokers"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(a.getOrDefault("interval-ms", "1000")));
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.STATE_DIR_CONFIG, a.get("state-dir"));
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), Integer.parseInt(a.getOrDefault("session-ms", "6000")));
        // Windows closed by stream time are emitted at once, not at most once a
        // second of wall-clock time (the default).
        p.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, 0L);

        Duration window = Duration.ofMillis(Long.parseLong(a.getOrDefault("window-ms", "1000")));
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(a.get("in"), Consumed.with(Serdes.String(), Serdes.String()))
                .selectKey((user, v) -> v.substring(v.indexOf(':') + 1))
                .groupByKey(Grouped.with("per-item", Serdes.String(), Serdes.String()))
                .windowedBy(TimeWindows.ofSizeAndGrace(window, Duration.ofMillis(200)))
                .emitStrategy(EmitStrategy.onWindowClose())
                .count(Materialized.as("per-item-counts"))
                .toStream()
                .map((w, n) -> KeyValue.pair(w.key(), w.key() + ":" + w.window().start() + ":" + n))
                .to(a.get("out"), Produced.with(Serdes.String(), Serdes.String()));

        Main.runUntilStopped(new KafkaStreams(builder.build(), p), Duration.ofSeconds(30));
    }
}

package exactly.bench.kstreams;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Runs one Nexmark query of bench/nexmark on Kafka Streams: exactly_once_v2,
 * commits every second (the checkpoint interval of the other systems), two
 * stream threads, no record cache (every count update is emitted), static
 * group membership so a restarted instance takes its partitions back at once.
 * Started again with the same --app-id and --state-dir it resumes from its
 * committed offsets and changelogs. Each output record keeps the timestamp of
 * its input record (Kafka Streams' default).
 *
 * <pre>java -cp 'target/classes:target/lib/*' exactly.bench.kstreams.Main \
 *   --brokers 127.0.0.1:9092 --query q1 --in nexmark --out q1-out --app-id q1 --state-dir /tmp/ks</pre>
 */
public final class Main {
    private Main() {}

    public static void main(String[] argv) throws InterruptedException {
        Map<String, String> a = flags(argv);
        String query = a.get("query"), out = a.get("out");

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, a.get("app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("brokers"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, a.get("state-dir"));
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), a.get("app-id") + "-instance");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        KStream<byte[], byte[]> events = builder.stream(a.get("in"), Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()));
        Produced<byte[], byte[]> produced = Produced.with(Serdes.ByteArray(), Serdes.ByteArray());
        switch (query) {
            case "q0" -> events.to(out, produced);
            case "q1" -> events.flatMapValues(v -> {
                Nexmark.Bid b = Nexmark.parseBid(v);
                return b == null ? List.<byte[]>of() : List.of(Nexmark.q1(b));
            }).to(out, produced);
            case "q2" -> events.flatMapValues(v -> {
                Nexmark.Bid b = Nexmark.parseBid(v);
                return b == null || !Nexmark.q2Selects(b) ? List.<byte[]>of() : List.of(Nexmark.q2(b));
            }).to(out, produced);
            case "count" -> events.<Long, byte[]>flatMap((k, v) -> {
                        Nexmark.Bid b = Nexmark.parseBid(v);
                        return b == null ? List.of() : List.of(KeyValue.pair(b.auction, new byte[0]));
                    })
                    .groupByKey(Grouped.with("bids-by-auction", Serdes.Long(), Serdes.ByteArray()))
                    .count(Materialized.as("bids-per-auction"))
                    .toStream()
                    .map((auction, n) -> KeyValue.pair((byte[]) null, Nexmark.count(auction, n)))
                    .to(out, produced);
            default -> throw new IllegalArgumentException("unknown --query " + query + ": use q0, q1, q2 or count");
        }

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch stopped = new CountDownLatch(1);
        boolean[] failed = {false};
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            failed[0] = true;
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                stopped.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(10))));
        streams.start();
        stopped.await();
        if (failed[0]) {
            System.exit(1);
        }
    }

    /** Parses --key value pairs; --brokers, --query, --in, --out, --app-id and --state-dir are required. */
    private static Map<String, String> flags(String[] argv) {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --flag value, got " + argv[i]);
            }
            a.put(argv[i].substring(2), argv[i + 1]);
        }
        for (String k : new String[] {"brokers", "query", "in", "out", "app-id", "state-dir"}) {
            if (!a.containsKey(k)) {
                throw new IllegalArgumentException("--" + k + " is required");
            }
        }
        return a;
    }
}

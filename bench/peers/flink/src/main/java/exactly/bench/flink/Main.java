package exactly.bench.flink;

import java.io.File;
import java.util.HashMap;
import java.util.Map;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Runs one Nexmark query of bench/nexmark on Apache Flink: a local MiniCluster
 * at parallelism 2, checkpoints every second into --checkpoints, Kafka source
 * from the earliest offset and an exactly-once Kafka sink. Started again with
 * the same --checkpoints directory it restores the latest checkpoint there.
 * Each output record keeps the timestamp of its input record.
 *
 * <pre>java -cp 'target/classes:target/lib/*' exactly.bench.flink.Main \
 *   --brokers 127.0.0.1:9092 --query q1 --in nexmark --out q1-out --checkpoints /tmp/ckpt</pre>
 */
public final class Main {
    private Main() {}

    /** One record: its value and the timestamp of the input record it comes from (Unix ms). A Flink POJO. */
    public static final class Rec {
        public long ts;
        public byte[] value;

        public Rec() {}

        Rec(long ts, byte[] value) {
            this.ts = ts;
            this.value = value;
        }
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = flags(argv);
        String brokers = a.get("brokers"), query = a.get("query"), in = a.get("in"), out = a.get("out");
        File checkpoints = new File(a.get("checkpoints"));

        Map<String, String> conf = new HashMap<>();
        conf.put("execution.checkpointing.dir", checkpoints.toURI().toString());
        conf.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.put("execution.checkpointing.num-retained", "3");
        String restore = latestCheckpoint(checkpoints);
        if (restore != null) {
            conf.put("execution.state-recovery.path", restore);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(Configuration.fromMap(conf));
        env.setParallelism(2);
        env.enableCheckpointing(1000); // exactly-once checkpoints
        env.getConfig().enableObjectReuse();

        KafkaSource<Rec> source = KafkaSource.<Rec>builder()
                .setBootstrapServers(brokers)
                .setTopics(in)
                .setGroupId("flink-" + out)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setDeserializer(new RecDeserializer())
                .build();
        DataStream<Rec> events = env.fromSource(source, WatermarkStrategy.noWatermarks(), "events");
        DataStream<Rec> results = switch (query) {
            case "q0" -> events;
            case "q1" -> events.flatMap((Rec r, Collector<Rec> c) -> {
                Nexmark.Bid b = Nexmark.parseBid(r.value);
                if (b != null) {
                    c.collect(new Rec(r.ts, Nexmark.q1(b)));
                }
            }).returns(Rec.class);
            case "q2" -> events.flatMap((Rec r, Collector<Rec> c) -> {
                Nexmark.Bid b = Nexmark.parseBid(r.value);
                if (b != null && Nexmark.q2Selects(b)) {
                    c.collect(new Rec(r.ts, Nexmark.q2(b)));
                }
            }).returns(Rec.class);
            case "count" -> events.flatMap((Rec r, Collector<Nexmark.Bid> c) -> {
                Nexmark.Bid b = Nexmark.parseBid(r.value);
                if (b != null) {
                    b.ts = r.ts;
                    c.collect(b);
                }
            }).returns(Nexmark.Bid.class).keyBy(b -> b.auction, Types.LONG).process(new CountBids()).name("bids-per-auction");
            default -> throw new IllegalArgumentException("unknown --query " + query + ": use q0, q1, q2 or count");
        };
        KafkaSink<Rec> sink = KafkaSink.<Rec>builder()
                .setBootstrapServers(brokers)
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix(a.getOrDefault("txn-prefix", "flink-" + out))
                .setProperty("transaction.timeout.ms", "900000") // the broker's transaction.max.timeout.ms
                .setRecordSerializer(new RecSerializer(out))
                .build();
        results.sinkTo(sink).name("out");
        env.execute("nexmark-" + query);
    }

    /** Parses --key value pairs; --brokers, --query, --in, --out and --checkpoints are required. */
    private static Map<String, String> flags(String[] argv) {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --flag value, got " + argv[i]);
            }
            a.put(argv[i].substring(2), argv[i + 1]);
        }
        for (String k : new String[] {"brokers", "query", "in", "out", "checkpoints"}) {
            if (!a.containsKey(k)) {
                throw new IllegalArgumentException("--" + k + " is required");
            }
        }
        return a;
    }

    /** Returns the URI of the newest completed checkpoint (…/job-id/chk-N with a _metadata file), or null. */
    static String latestCheckpoint(File dir) {
        File best = null;
        File[] jobs = dir.listFiles(File::isDirectory);
        for (File job : jobs == null ? new File[0] : jobs) {
            File[] chks = job.listFiles(f -> f.getName().startsWith("chk-") && new File(f, "_metadata").isFile());
            for (File chk : chks == null ? new File[0] : chks) {
                if (best == null || new File(chk, "_metadata").lastModified() > new File(best, "_metadata").lastModified()) {
                    best = chk;
                }
            }
        }
        return best == null ? null : best.toURI().toString();
    }

    /** Makes a Rec of each Kafka record: its timestamp and value. */
    static final class RecDeserializer implements KafkaRecordDeserializationSchema<Rec> {
        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> r, Collector<Rec> out) {
            out.collect(new Rec(r.timestamp(), r.value()));
        }

        @Override
        public TypeInformation<Rec> getProducedType() {
            return TypeInformation.of(Rec.class);
        }
    }

    /** Writes a Rec's value to the topic, with the Rec's timestamp. */
    static final class RecSerializer implements KafkaRecordSerializationSchema<Rec> {
        private final String topic;

        RecSerializer(String topic) {
            this.topic = topic;
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(Rec r, KafkaSinkContext ctx, Long timestamp) {
            return new ProducerRecord<>(topic, null, r.ts, null, r.value);
        }
    }

    /** Keeps the number of bids per auction in keyed state; emits the running count with each bid. */
    static final class CountBids extends KeyedProcessFunction<Long, Nexmark.Bid, Rec> {
        private transient ValueState<Long> count;

        @Override
        public void open(org.apache.flink.api.common.functions.OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("bids", Types.LONG));
        }

        @Override
        public void processElement(Nexmark.Bid b, Context ctx, Collector<Rec> out) throws Exception {
            Long n = count.value();
            long next = n == null ? 1 : n + 1;
            count.update(next);
            out.collect(new Rec(b.ts, Nexmark.count(b.auction, next)));
        }
    }
}

package exactly.bench.flink;

import exactly.bench.nexmark.Nexmark;
import exactly.bench.nexmark.Top;
import java.io.File;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
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
import org.apache.flink.streaming.api.functions.windowing.ProcessAllWindowFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
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
        Map<String, String> a = flags(argv, "brokers", "query", "in", "out", "checkpoints");
        String brokers = a.get("brokers"), query = a.get("query"), in = a.get("in"), out = a.get("out");
        StreamExecutionEnvironment env = environment(a);

        DataStream<Rec> results = switch (query) {
            case "q5", "q7" -> {
                // Bids only, timestamped with their dateTime; the source tracks the watermark
                // of each Kafka partition and emits their minimum.
                WatermarkStrategy<Nexmark.Bid> watermarks = WatermarkStrategy
                        .<Nexmark.Bid>forBoundedOutOfOrderness(Duration.ofMillis(Nexmark.MAX_OUT_OF_ORDERNESS))
                        .withTimestampAssigner((b, ts) -> b.dateTime);
                DataStream<Nexmark.Bid> bids = env.fromSource(source(brokers, in, out, new BidDeserializer()), watermarks, "bids");
                yield query.equals("q7") ? highestBids(bids) : hotItems(bids);
            }
            default -> perRecord(query, env.fromSource(source(brokers, in, out, new RecDeserializer()), WatermarkStrategy.noWatermarks(), "events"));
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

    /** The Kafka source of topic in, from the earliest offset, reading records with deserializer. */
    private static <T> KafkaSource<T> source(String brokers, String in, String out, KafkaRecordDeserializationSchema<T> deserializer) {
        return KafkaSource.<T>builder()
                .setBootstrapServers(brokers)
                .setTopics(in)
                .setGroupId("flink-" + out)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setDeserializer(deserializer)
                .build();
    }

    /** The queries that map each event to at most one output: q0, q1, q2, count, q14, q21 and q22. */
    private static DataStream<Rec> perRecord(String query, DataStream<Rec> events) {
        return switch (query) {
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
            case "q14", "q21", "q22" -> events.flatMap((Rec r, Collector<Rec> c) -> {
                byte[] o = Nexmark.stateless(query, r.value);
                if (o != null) {
                    c.collect(new Rec(r.ts, o));
                }
            }).returns(Rec.class);
            default -> throw new IllegalArgumentException("unknown --query " + query + ": use q0, q1, q2, count, q5, q7, q14, q21 or q22");
        };
    }

    /** q7: per tumbling window, the bids at its highest price, all in one task (a global maximum). */
    private static DataStream<Rec> highestBids(DataStream<Nexmark.Bid> bids) {
        return bids.windowAll(TumblingEventTimeWindows.of(Duration.ofMillis(Nexmark.Q7_SIZE)))
                .aggregate(new HighestPrice(), new EmitHighestBids()).name("highest-bids");
    }

    /**
     * q5: the bids per auction and sliding window, counted in parallel, each count timestamped
     * with its window's last millisecond; then, in one task, per tumbling window of the slide,
     * which holds the counts of exactly one sliding window, the auctions with the most bids.
     */
    private static DataStream<Rec> hotItems(DataStream<Nexmark.Bid> bids) {
        return bids.keyBy(b -> b.auction, Types.LONG)
                .window(SlidingEventTimeWindows.of(Duration.ofMillis(Nexmark.Q5_SIZE), Duration.ofMillis(Nexmark.Q5_SLIDE)))
                .aggregate(new CountInWindow(), new AuctionCount()).name("bids-per-auction-window")
                .windowAll(TumblingEventTimeWindows.of(Duration.ofMillis(Nexmark.Q5_SLIDE)))
                .aggregate(new MostBids(), new EmitHotItems()).name("hot-items");
    }

    /**
     * The environment of a query (DataStream or SQL): parallelism 2, exactly-once checkpoints
     * every --interval-ms (1 s) into --checkpoints, restoring the latest one there; watermarks
     * every --watermark-interval-ms when given (Flink's default otherwise, 200 ms).
     */
    static StreamExecutionEnvironment environment(Map<String, String> a) {
        File checkpoints = new File(a.get("checkpoints"));
        long intervalMs = intervalMs(a);
        Map<String, String> conf = new HashMap<>();
        if (a.containsKey("watermark-interval-ms")) {
            conf.put("pipeline.auto-watermark-interval", Long.parseLong(a.get("watermark-interval-ms")) + " ms");
        }
        conf.put("execution.checkpointing.dir", checkpoints.toURI().toString());
        conf.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.put("execution.checkpointing.num-retained", "3");
        String restore = latestCheckpoint(checkpoints);
        if (restore != null) {
            conf.put("execution.state-recovery.path", restore);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(Configuration.fromMap(conf));
        env.setParallelism(2);
        env.enableCheckpointing(intervalMs); // exactly-once checkpoints
        env.getConfig().enableObjectReuse();
        return env;
    }

    /** The checkpoint interval of --interval-ms, 1000 when it is not given. */
    static long intervalMs(Map<String, String> a) {
        return Long.parseLong(a.getOrDefault("interval-ms", "1000"));
    }

    /** Parses --key value pairs; each of required must be given. */
    static Map<String, String> flags(String[] argv, String... required) {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --flag value, got " + argv[i]);
            }
            a.put(argv[i].substring(2), argv[i + 1]);
        }
        for (String k : required) {
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

    /** Makes a Bid of each Kafka record that is a bid; persons and auctions are dropped. */
    static final class BidDeserializer implements KafkaRecordDeserializationSchema<Nexmark.Bid> {
        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> r, Collector<Nexmark.Bid> out) {
            Nexmark.Bid b = Nexmark.parseBid(r.value());
            if (b != null) {
                out.collect(b);
            }
        }

        @Override
        public TypeInformation<Nexmark.Bid> getProducedType() {
            return TypeInformation.of(Nexmark.Bid.class);
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

    /** An aggregate into a {@link Top}; subclasses say what an input adds. */
    abstract static class TopAggregate<IN> implements AggregateFunction<IN, Top, Top> {
        @Override
        public Top createAccumulator() {
            return new Top();
        }

        @Override
        public Top getResult(Top top) {
            return top;
        }

        @Override
        public Top merge(Top a, Top b) {
            return a.merge(b);
        }
    }

    /** q7's accumulator: the bids of a window at its highest price so far, as {auction, bidder, price, dateTime}. */
    static final class HighestPrice extends TopAggregate<Nexmark.Bid> {
        @Override
        public Top add(Nexmark.Bid b, Top top) {
            return top.add(b.price, new long[] {b.auction, b.bidder, b.price, b.dateTime});
        }
    }

    /** Emits q7's outputs of a window when the watermark passes its end, timestamped with the end. */
    static final class EmitHighestBids extends ProcessAllWindowFunction<Top, Rec, TimeWindow> {
        @Override
        public void process(Context ctx, Iterable<Top> tops, Collector<Rec> out) {
            TimeWindow w = ctx.window();
            for (Top top : tops) {
                for (long[] b : top.ties) {
                    out.collect(new Rec(w.getEnd(), Nexmark.q7(w.getStart(), b[0], b[1], b[2], b[3])));
                }
            }
        }
    }

    /** Counts the bids of one auction in one window. */
    static final class CountInWindow implements AggregateFunction<Nexmark.Bid, Long, Long> {
        @Override
        public Long createAccumulator() {
            return 0L;
        }

        @Override
        public Long add(Nexmark.Bid b, Long n) {
            return n + 1;
        }

        @Override
        public Long getResult(Long n) {
            return n;
        }

        @Override
        public Long merge(Long a, Long b) {
            return a + b;
        }
    }

    /** Emits an auction's count in a window as {auction, count}, timestamped (by Flink) with the window's last millisecond. */
    static final class AuctionCount extends ProcessWindowFunction<Long, long[], Long, TimeWindow> {
        @Override
        public void process(Long auction, Context ctx, Iterable<Long> counts, Collector<long[]> out) {
            for (long n : counts) {
                out.collect(new long[] {auction, n});
            }
        }
    }

    /** q5's accumulator: the {auction, count} pairs of a window with the highest count so far. */
    static final class MostBids extends TopAggregate<long[]> {
        @Override
        public Top add(long[] auctionCount, Top top) {
            return top.add(auctionCount[1], auctionCount);
        }
    }

    /**
     * Emits q5's outputs of the sliding window ending where this tumbling window of the slide
     * ends, when the watermark passes that end, timestamped with it.
     */
    static final class EmitHotItems extends ProcessAllWindowFunction<Top, Rec, TimeWindow> {
        @Override
        public void process(Context ctx, Iterable<Top> tops, Collector<Rec> out) {
            long end = ctx.window().getEnd();
            for (Top top : tops) {
                for (long[] a : top.ties) {
                    out.collect(new Rec(end, Nexmark.q5(end - Nexmark.Q5_SIZE, a[0], a[1])));
                }
            }
        }
    }
}

package exactly.bench.flink;

import java.io.File;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * The large-state benchmark's job (bench/cmd/state-bench) on Apache Flink: a
 * local MiniCluster, RocksDB state with incremental checkpoints into the
 * local directory --checkpoints, --parallelism subtasks. Of every
 * 1+--updates-per-insert events the first inserts the next new key and the
 * others update keys drawn uniformly among those inserted so far; every
 * event reads its key's value and writes --value-bytes of random bytes led
 * by the key's write count. The REST API listens on --rest-port, where
 * state-bench reads the checkpoint statistics.
 *
 * <pre>java -cp 'target/classes:target/lib/*' exactly.bench.flink.StateBench --keys 1048576 \
 *   --updates-per-insert 1 --value-bytes 1024 --parallelism 2 --interval-ms 10000 \
 *   --checkpoints /tmp/ckpt --rocksdb-dir /tmp/rocksdb --rest-port 31081</pre>
 */
public final class StateBench {
    private StateBench() {}

    /** One input record: write key's value for the seq-th event of the input. A Flink POJO. */
    public static final class Event {
        public long key;
        public long seq;

        public Event() {}

        Event(long key, long seq) {
            this.key = key;
            this.seq = seq;
        }
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = Main.flags(argv, "keys", "updates-per-insert", "value-bytes", "parallelism",
                "interval-ms", "checkpoints", "rocksdb-dir", "rest-port");
        long keys = Long.parseLong(a.get("keys"));
        long updates = Long.parseLong(a.get("updates-per-insert"));
        int valueBytes = Integer.parseInt(a.get("value-bytes"));
        int parallelism = Integer.parseInt(a.get("parallelism"));

        Map<String, String> conf = new HashMap<>();
        conf.put("state.backend.type", "rocksdb");
        conf.put("execution.checkpointing.incremental", "true");
        conf.put("execution.checkpointing.dir", new File(a.get("checkpoints")).toURI().toString());
        conf.put("execution.checkpointing.num-retained", "1");
        conf.put("execution.checkpointing.timeout", "30 min");
        conf.put("state.backend.rocksdb.localdir", new File(a.get("rocksdb-dir")).getAbsolutePath());
        conf.put("taskmanager.memory.managed.size", a.getOrDefault("managed-memory", "256m"));
        conf.put("rest.address", "127.0.0.1");
        conf.put("rest.bind-address", "127.0.0.1");
        conf.put("rest.port", a.get("rest-port"));
        // state-bench reads the record counts and the checkpoints' statistics every 200 ms.
        conf.put("metrics.fetcher.update-interval", "500 ms");
        conf.put("rest.cache.checkpoint-statistics.timeout", "500 ms");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(Configuration.fromMap(conf));
        env.setParallelism(parallelism);
        env.enableCheckpointing(Long.parseLong(a.get("interval-ms"))); // exactly-once checkpoints
        env.getConfig().enableObjectReuse();

        // The generator splits its index range into one contiguous range per subtask; the
        // events are numbered across them (index x of range r is event r + p*x) so that both
        // subtasks insert keys in the same order as exactly's round-robin splits do.
        long perRange = keys * (1 + updates) / parallelism;
        GeneratorFunction<Long, Event> gen = x -> at(x % perRange * parallelism + x / perRange, updates);
        DataGeneratorSource<Event> source = new DataGeneratorSource<>(gen, perRange * parallelism, Types.POJO(Event.class));
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "events")
                .keyBy(e -> e.key, Types.LONG)
                .process(new Write(valueBytes)).name("state")
                .sinkTo(new DiscardingSink<>()).name("discard");
        env.execute("state-bench");
    }

    /** Event i: the next new key for the first of each block of 1+updates events, else a key drawn from those so far. */
    static Event at(long i, long updates) {
        long block = 1 + updates, n = i / block;
        if (i % block == 0) {
            return new Event(n, i);
        }
        return new Event(new SplittableRandom(i).nextLong(n + 1), i);
    }

    /** Reads the key's value and writes a new one of random bytes led by its write count. */
    static final class Write extends KeyedProcessFunction<Long, Event, Long> {
        private final int valueBytes;
        private transient ValueState<byte[]> value;

        Write(int valueBytes) {
            this.valueBytes = valueBytes;
        }

        @Override
        public void open(OpenContext ctx) {
            value = getRuntimeContext().getState(new ValueStateDescriptor<>("value", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
        }

        @Override
        public void processElement(Event e, Context ctx, Collector<Long> out) throws Exception {
            byte[] old = value.value();
            long writes = 1;
            if (old != null) {
                writes += littleEndian(old);
            }
            byte[] v = new byte[valueBytes];
            SplittableRandom r = new SplittableRandom(e.key * 0x9E3779B97F4A7C15L ^ e.seq);
            for (int i = 8; i < v.length; i += 8) {
                long x = r.nextLong();
                for (int b = 0; b < 8 && i + b < v.length; b++) {
                    v[i + b] = (byte) (x >>> (8 * b));
                }
            }
            for (int b = 0; b < 8; b++) {
                v[b] = (byte) (writes >>> (8 * b));
            }
            value.update(v);
        }

        private static long littleEndian(byte[] b) {
            long x = 0;
            for (int i = 7; i >= 0; i--) {
                x = x << 8 | (b[i] & 0xff);
            }
            return x;
        }
    }
}

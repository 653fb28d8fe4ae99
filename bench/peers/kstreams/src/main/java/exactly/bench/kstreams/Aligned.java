package exactly.bench.kstreams;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Regroups streams by key for event-time windows, in place of repartition topics.
 *
 * <p>A repartition topic mixes, in each of its partitions, the records of every task that writes
 * to it, in the order they are written: as the tasks progress at their own pace (two stream
 * threads, and input partitions of different sizes), a record can come seconds of event time
 * after newer ones from a faster task, later than the grace period of 1 s, and its window then
 * drops it. Here each writing task, that of partition i, writes to its own topic, name-i, with
 * as many partitions as the input; the task of partition j reads partition j of all these
 * topics, and Kafka Streams processes a task's input partitions in timestamp order, waiting up
 * to max.task.idle.ms for a partition that has no record yet. The records of each partition are
 * in timestamp order, so a window sees them all in order, as after Flink's watermarks.
 */
final class Aligned {
    private final StreamsBuilder builder;
    private final String prefix;
    private final int partitions;
    private final List<NewTopic> topics = new ArrayList<>();

    /** Regroups into topics named prefix-name-i, of partitions partitions, the number of the input's. */
    Aligned(StreamsBuilder builder, String prefix, int partitions) {
        this.builder = builder;
        this.prefix = prefix;
        this.partitions = partitions;
    }

    /** Writes s to the topics prefix-name-i and returns the stream of their records, grouped by key. */
    <V> KStream<Long, V> regroup(KStream<Long, V> s, String name, Serde<V> values) {
        List<String> names = new ArrayList<>();
        for (int i = 0; i < partitions; i++) {
            names.add(prefix + "-" + name + "-" + i);
            // No time-based retention: the records are timestamped in the generator's event
            // time, which may be older than retention.ms (as for Kafka Streams' repartition topics).
            topics.add(new NewTopic(names.get(i), Optional.of(partitions), Optional.empty()).configs(Map.of("retention.ms", "-1")));
        }
        s.to((k, v, ctx) -> prefix + "-" + name + "-" + ctx.partition(), Produced.with(Serdes.Long(), values));
        return builder.stream(names, Consumed.with(Serdes.Long(), values));
    }

    /** Creates the topics regroup writes to, but those that exist (a restart). */
    void createTopics(Admin admin) throws InterruptedException, ExecutionException {
        for (KafkaFuture<Void> f : admin.createTopics(topics).values().values()) {
            try {
                f.get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
        }
    }
}

package exactly.bench.flink;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

/**
 * Runs one Nexmark query of bench/nexmark in Flink SQL, as Flink's Nexmark suite runs its
 * queries: the tables of resources/nexmark/tables.sql (the Kafka input as raw lines, views
 * parsing them, an exactly-once Kafka sink) and the query's views and INSERT of resources/nexmark/&lt;query&gt;.sql,
 * on the environment of {@link Main} (a local MiniCluster at parallelism 2, checkpoints every
 * second into --checkpoints, restored from the latest there). The outputs are those of the
 * DataStream peer and of exactly, byte for byte.
 *
 * <pre>java -cp 'target/classes:target/lib/*' exactly.bench.flink.Sql \
 *   --brokers 127.0.0.1:9092 --query q1 --in nexmark --out q1-out --checkpoints /tmp/ckpt</pre>
 */
public final class Sql {
    private Sql() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = Main.flags(argv, "brokers", "query", "in", "out", "checkpoints");
        String query = a.get("query");
        String insert = resource(query + ".sql");
        if (insert == null) {
            throw new IllegalArgumentException("unknown --query " + query + ": no resources/nexmark/" + query + ".sql");
        }
        StreamExecutionEnvironment env = Main.environment(a);
        if (a.containsKey("side-input")) { // q13's, read by SideInput
            Configuration params = new Configuration();
            params.setString("side-input", a.get("side-input"));
            env.getConfig().setGlobalJobParameters(params);
        }
        StreamTableEnvironment tables = StreamTableEnvironment.create(env);
        tables.getConfig().set("table.local-time-zone", "UTC");
        tables.getConfig().set("pipeline.name", "nexmark-sql-" + query);
        String ddl = resource("tables.sql")
                .replace("${in}", a.get("in"))
                .replace("${out}", a.get("out"))
                .replace("${brokers}", a.get("brokers"))
                .replace("${group}", "flink-sql-" + a.get("out"))
                .replace("${txn}", a.getOrDefault("txn-prefix", "flink-sql-" + a.get("out")));
        for (String statement : statements(ddl)) {
            tables.executeSql(statement);
        }
        // The query's file: views it needs, then its INSERT, which runs the job.
        List<String> script = statements(insert);
        String last = script.get(script.size() - 1);
        if (!last.startsWith("INSERT")) {
            throw new IllegalStateException(query + ".sql does not end with its INSERT");
        }
        for (String statement : script.subList(0, script.size() - 1)) {
            tables.executeSql(statement);
        }
        tables.executeSql(last).await();
    }

    /** The text of resources/nexmark/name, or null when there is none. */
    private static String resource(String name) throws IOException {
        try (InputStream in = Sql.class.getResourceAsStream("/nexmark/" + name)) {
            return in == null ? null : new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    /** The statements of a script: its lines without "--" comments, cut at each ';'. */
    static List<String> statements(String script) {
        StringBuilder b = new StringBuilder();
        for (String line : script.split("\n")) {
            if (!line.strip().startsWith("--")) {
                b.append(line).append('\n');
            }
        }
        List<String> out = new ArrayList<>();
        for (String s : b.toString().split(";")) {
            if (!s.isBlank()) {
                out.add(s.strip());
            }
        }
        return out;
    }
}

package exactly.bench.flink;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.apache.flink.table.functions.FunctionContext;
import org.apache.flink.table.functions.ScalarFunction;

/**
 * q13's side input as a SQL function: side_value(key) is the value of key in the file of
 * lines "key,value" named by the job parameter side-input ({@link Sql} sets it from
 * --side-input), loaded whole when the function opens.
 */
public final class SideInput extends ScalarFunction {
    private Map<Long, String> values;

    @Override
    public void open(FunctionContext context) throws IOException {
        String path = context.getJobParameter("side-input", null);
        if (path == null) {
            throw new IllegalStateException("q13 needs --side-input, the file of its side input");
        }
        values = new HashMap<>();
        for (String line : new String(Files.readAllBytes(Path.of(path)), StandardCharsets.UTF_8).split("\n")) {
            int c = line.indexOf(',');
            if (c < 0) {
                throw new IllegalArgumentException(path + ": want key,value, got " + line);
            }
            values.put(Long.parseLong(line.substring(0, c)), line.substring(c + 1));
        }
    }

    public String eval(Long key) {
        String v = key == null ? null : values.get(key);
        if (v == null) {
            throw new IllegalArgumentException("q13: no side input value of key " + key);
        }
        return v;
    }
}

package io.sparkafka.bench;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/** The result line both Java peers print: one JSON object with the fields of benchmarks/worker.py. */
final class Json {
    private Json() {
    }

    static String write(Object value) {
        StringBuilder out = new StringBuilder();
        append(out, value);
        return out.toString();
    }

    private static void append(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Double || value instanceof Float) {
            double d = ((Number) value).doubleValue();
            out.append(Double.isFinite(d) ? Double.toString(d) : "null");
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : map.entrySet()) {
                if (!first) {
                    out.append(", ");
                }
                first = false;
                append(out, String.valueOf(e.getKey()));
                out.append(": ");
                append(out, e.getValue());
            }
            out.append('}');
        } else {
            out.append('"');
            for (char c : value.toString().toCharArray()) {
                if (c == '"' || c == '\\') {
                    out.append('\\').append(c);
                } else if (c < 0x20) {
                    out.append(String.format("\\u%04x", (int) c));
                } else {
                    out.append(c);
                }
            }
            out.append('"');
        }
    }

    /** Nearest-rank percentiles (ms) of the finite values, keyed as sparkafka.cli.perf.LatencyStats does. */
    static Map<String, Object> percentiles(double[] values, int count) {
        double[] sorted = Arrays.stream(values, 0, count).filter(Double::isFinite).sorted().toArray();
        Map<String, Object> out = new LinkedHashMap<>();
        for (double p : new double[] {50.0, 95.0, 99.0, 99.9}) {
            String name = ("p" + (p == Math.rint(p) ? Long.toString((long) p) : Double.toString(p))).replace('.', '_');
            if (sorted.length == 0) {
                out.put(name, 0.0);
                continue;
            }
            long rank = Math.max(1, (long) Math.ceil(Math.round(p * sorted.length / 100.0 * 1e6) / 1e6));
            out.put(name, sorted[(int) Math.min(rank, sorted.length) - 1]);
        }
        return out;
    }
}

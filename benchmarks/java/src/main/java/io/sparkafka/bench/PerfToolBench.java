package io.sparkafka.bench;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.tools.ProducerPerformance;

/**
 * Kafka's own ProducerPerformance (the tool behind kafka-producer-perf-test) as a benchmark peer: its
 * main() runs twice in this JVM, first --warmup-records records (the JIT compiles the producer's send
 * path; each run builds and closes its own KafkaProducer), then the timed --records. The tool's own
 * totals line of the timed run gives records/s and its latency percentiles; this process's CPU time
 * (/proc/self/stat) is read around the timed main() call, so it includes that run's producer start-up
 * and close. Prints one JSON line with benchmarks/worker.py's fields (no send-loop rate: the tool does
 * not report when its loop ended).
 *
 * <p>Usage: {@code java -cp ... io.sparkafka.bench.PerfToolBench --records N [--warmup-records W]
 * [--value-size 100] [--clock-ticks 100] [--client java-perf] -- <ProducerPerformance options without
 * --num-records>}
 */
public final class PerfToolBench {
    /** ProducerPerformance.Stats.printTotal's line (kafka-tools 4.x). */
    private static final Pattern TOTAL = Pattern.compile(
        "(\\d+) records sent, ([0-9.]+) records/sec \\(([0-9.]+) MB/sec\\), ([0-9.]+) ms avg latency, "
            + "([0-9.]+) ms max latency, (\\d+) ms 50th, (\\d+) ms 95th, (\\d+) ms 99th, (\\d+) ms 99.9th");

    private PerfToolBench() {
    }

    private static String runTool(List<String> toolArgs, long records) throws Exception {
        List<String> args = new ArrayList<>(toolArgs);
        args.add("--num-records");
        args.add(Long.toString(records));
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            ProducerPerformance.main(args.toArray(new String[0]));
        } finally {
            System.setOut(original);
        }
        String text = captured.toString(StandardCharsets.UTF_8);
        System.err.print(text);  // the tool's own report, for the log
        return text;
    }

    public static void main(String[] argv) throws Exception {
        Locale.setDefault(Locale.ROOT);  // the tool prints with String.format: '.' as the decimal point
        int split = Arrays.asList(argv).indexOf("--");
        if (split < 0) {
            throw new IllegalArgumentException("ProducerPerformance's options follow '--'");
        }
        Args args = new Args(argv, 0, split);
        List<String> toolArgs = Arrays.asList(argv).subList(split + 1, argv.length);
        long n = args.getLong("records", -1);
        if (n < 1) {
            throw new IllegalArgumentException("--records must be >= 1, got " + n);
        }
        long warmup = args.getLong("warmup-records", 0);
        long clockTicks = args.getLong("clock-ticks", 100);
        long valueSize = args.getLong("value-size", 100);

        if (warmup > 0) {
            runTool(toolArgs, warmup);
        }
        double cpu0 = ProcStats.cpuSeconds(clockTicks);
        String text = runTool(toolArgs, n);
        double cpu = ProcStats.cpuSeconds(clockTicks) - cpu0;

        Matcher m = null;
        for (String line : text.split("\n")) {
            Matcher candidate = TOTAL.matcher(line);
            if (candidate.find()) {
                m = candidate;
            }
        }
        if (m == null) {
            throw new IllegalStateException("no totals line in ProducerPerformance's output:\n" + text);
        }
        long acked = Long.parseLong(m.group(1));
        double rate = Double.parseDouble(m.group(2));
        double seconds = rate > 0 ? acked / rate : Double.NaN;
        Map<String, Object> percentiles = new LinkedHashMap<>();
        percentiles.put("p50", Double.parseDouble(m.group(6)));
        percentiles.put("p95", Double.parseDouble(m.group(7)));
        percentiles.put("p99", Double.parseDouble(m.group(8)));
        percentiles.put("p99_9", Double.parseDouble(m.group(9)));

        Map<String, Object> result = new LinkedHashMap<>();
        result.put("client", args.get("client", "java-perf"));
        result.put("records", n);
        result.put("acked", acked);
        result.put("errors", n - acked);
        result.put("first_error", acked == n ? null : (n - acked) + " records not acknowledged (the tool's stderr has"
            + " each exception)");
        result.put("seconds", seconds);
        result.put("send_seconds", null);
        result.put("records_per_second", rate);
        result.put("send_records_per_second", null);
        result.put("mb_per_second", acked * (double) valueSize / seconds / 1e6);
        result.put("cpu_seconds", cpu);
        result.put("cpu_seconds_per_million", cpu / n * 1e6);
        result.put("peak_rss_mb", ProcStats.peakRssMb());
        result.put("latency_avg_ms", Double.parseDouble(m.group(4)));
        result.put("latency_max_ms", Double.parseDouble(m.group(5)));
        result.put("percentiles_ms", percentiles);
        result.put("warmup_records", warmup);
        System.out.println(Json.write(result));
    }
}

package io.sparkafka.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The benchmark's per-record workload through Kafka's own KafkaProducer, as benchmarks/worker.py runs it
 * for the Python clients: one fixed payload (the bytes of --payload-file, the worker's payload), keys
 * from a pool of 65,536 distinct keys of --key-size bytes (decimal, zero-padded, as
 * sparkafka.cli.perf.make_keys; none with --key-size 0), record i takes key i % 65,536, and a completion
 * callback on every record: a shared counting one, and on every --sample-every-th record one that also
 * keeps its send-to-acknowledgement latency.
 *
 * <p>One producer (acks=all, idempotence, linger.ms, batch.size and compression.type as given) sends
 * --warmup-records first (the JIT compiles the send path), flushes, then the timed --records: the clock
 * and the process's CPU time (/proc/self/stat) are read around the timed send loop and its flush only.
 * Prints one JSON line with worker.py's fields, plus the resident set right before the timed run and the
 * producer's own batch metrics after it (producer-metrics batch-size-avg and records-per-request-avg: Kafka's
 * windowed averages, the last 30 to 60 seconds, so they include the warm-up's batches when the two together
 * took less) and buffer-total-bytes (buffer.memory).
 *
 * <p>Usage: {@code java -cp ... io.sparkafka.bench.KeyedProducerBench --bootstrap-servers H:P --topic T
 * --records N --payload-file F [--key-size 8] [--warmup-records W] [--compression none] [--batch-size 16384]
 * [--linger-ms 5] [--sample-every 8] [--clock-ticks 100] [--client java]}
 */
public final class KeyedProducerBench {
    private static final int KEY_POOL = 1 << 16;
    private static final long KEY_POOL_BYTES = 64L << 20;
    private static final int MAX_SAMPLES = 1_000_000;

    private KeyedProducerBench() {
    }

    /** Counts acknowledgements; runs on the producer's I/O thread only (flush() orders it before main). */
    static final class Counter implements Callback {
        long acked;
        long errors;
        String firstError;

        @Override
        public void onCompletion(RecordMetadata metadata, Exception exception) {
            if (exception == null) {
                acked++;
            } else {
                errors++;
                if (firstError == null) {
                    firstError = exception.toString();
                }
            }
        }
    }

    /** The callback of a sampled record: counts it and keeps its latency in its slot. */
    static final class Sampled implements Callback {
        private final Counter counter;
        private final double[] latencies;
        private final int slot;
        private final long sentNanos;

        Sampled(Counter counter, double[] latencies, int slot) {
            this.counter = counter;
            this.latencies = latencies;
            this.slot = slot;
            this.sentNanos = System.nanoTime();
        }

        @Override
        public void onCompletion(RecordMetadata metadata, Exception exception) {
            counter.onCompletion(metadata, exception);
            if (exception == null) {
                latencies[slot] = (System.nanoTime() - sentNanos) / 1e6;
            }
        }
    }

    static byte[][] keys(int keySize) {
        if (keySize <= 0) {
            return new byte[][] {null};
        }
        int count = KEY_POOL;
        while (count > 1 && (long) count * keySize > KEY_POOL_BYTES) {
            count >>= 1;
        }
        byte[][] keys = new byte[count][];
        for (int i = 0; i < count; i++) {
            String digits = "0".repeat(Math.max(0, keySize - Integer.toString(i).length())) + i;
            keys[i] = digits.substring(digits.length() - keySize).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        }
        return keys;
    }

    /** Sends records [0, n) and returns the nanoTime when the send loop ended. */
    static long send(KafkaProducer<byte[], byte[]> producer, String topic, long n, byte[][] keys, byte[] payload,
                     int every, Counter counter, double[] latencies) {
        int mask = keys.length - 1;
        for (long i = 0; i < n; i++) {
            Callback callback = i % every == 0 ? new Sampled(counter, latencies, (int) (i / every)) : counter;
            producer.send(new ProducerRecord<>(topic, keys[(int) (i & mask)], payload), callback);
        }
        return System.nanoTime();
    }

    /** A producer-metrics value (NaN if the producer has no such metric). */
    static double producerMetric(KafkaProducer<byte[], byte[]> producer, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : producer.metrics().entrySet()) {
            MetricName metric = e.getKey();
            if (metric.group().equals("producer-metrics") && metric.name().equals(name)
                    && e.getValue().metricValue() instanceof Number value) {
                return value.doubleValue();
            }
        }
        return Double.NaN;
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv, 0, argv.length);
        String topic = args.get("topic");
        long n = args.getLong("records", -1);
        if (n < 1) {
            throw new IllegalArgumentException("--records must be >= 1, got " + n);
        }
        long warmup = args.getLong("warmup-records", 0);
        long clockTicks = args.getLong("clock-ticks", 100);
        byte[] payload = Files.readAllBytes(Path.of(args.get("payload-file")));
        byte[][] keys = keys((int) args.getLong("key-size", 8));
        int every = (int) Math.max(args.getLong("sample-every", 8), -(-n / MAX_SAMPLES));

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap-servers"));
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.LINGER_MS_CONFIG, args.get("linger-ms", "5"));
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, args.get("batch-size", "16384"));
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, args.get("compression", "none"));
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        Map<String, Object> result = new LinkedHashMap<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            producer.partitionsFor(topic);
            if (warmup > 0) {
                Counter warm = new Counter();
                send(producer, topic, warmup, keys, payload, every, warm, new double[(int) (warmup / every) + 1]);
                producer.flush();
                if (warm.errors > 0) {
                    throw new IllegalStateException(warm.errors + " warm-up records failed: " + warm.firstError);
                }
            }
            Counter counter = new Counter();
            int slots = (int) ((n + every - 1) / every);
            double[] latencies = new double[slots];
            java.util.Arrays.fill(latencies, Double.NaN);
            double rssBefore = ProcStats.rssMb();
            double cpu0 = ProcStats.cpuSeconds(clockTicks);
            long started = System.nanoTime();
            long sendDone = send(producer, topic, n, keys, payload, every, counter, latencies);
            producer.flush();
            long finished = System.nanoTime();
            double cpu = ProcStats.cpuSeconds(clockTicks) - cpu0;

            double seconds = (finished - started) / 1e9;
            double sendSeconds = (sendDone - started) / 1e9;
            double sum = 0;
            double max = 0;
            int samples = 0;
            for (double latency : latencies) {
                if (Double.isFinite(latency)) {
                    sum += latency;
                    max = Math.max(max, latency);
                    samples++;
                }
            }
            result.put("client", args.get("client", "java"));
            result.put("records", n);
            result.put("acked", counter.acked);
            result.put("errors", counter.errors);
            result.put("first_error", counter.firstError);
            result.put("seconds", seconds);
            result.put("send_seconds", sendSeconds);
            result.put("records_per_second", counter.acked / seconds);
            result.put("send_records_per_second", n / sendSeconds);
            result.put("mb_per_second", counter.acked * (double) payload.length / seconds / 1e6);
            result.put("cpu_seconds", cpu);
            result.put("cpu_seconds_per_million", cpu / n * 1e6);
            result.put("peak_rss_mb", ProcStats.peakRssMb());
            result.put("latency_avg_ms", samples > 0 ? sum / samples : null);
            result.put("latency_max_ms", samples > 0 ? max : null);
            result.put("percentiles_ms", samples > 0 ? Json.percentiles(latencies, latencies.length) : null);
            result.put("warmup_records", warmup);
            result.put("rss_before_mb", rssBefore);
            result.put("batch_size_avg", producerMetric(producer, "batch-size-avg"));
            result.put("records_per_request_avg", producerMetric(producer, "records-per-request-avg"));
            result.put("buffer_memory", producerMetric(producer, "buffer-total-bytes"));
        }
        System.out.println(Json.write(result));
    }
}

package io.sparkafka.bench;

import java.util.HashMap;
import java.util.Map;

/** {@code --name value} pairs; a missing required option or a bad number names the option. */
final class Args {
    private final Map<String, String> values = new HashMap<>();

    Args(String[] argv, int from, int to) {
        for (int i = from; i < to; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= to) {
                throw new IllegalArgumentException("expected --name value pairs, got " + argv[i]);
            }
            values.put(argv[i].substring(2), argv[i + 1]);
        }
    }

    String get(String name) {
        String value = values.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return value;
    }

    String get(String name, String fallback) {
        return values.getOrDefault(name, fallback);
    }

    long getLong(String name, long fallback) {
        String value = values.get(name);
        if (value == null) {
            return fallback;
        }
        try {
            return Long.parseLong(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + " must be an integer, got " + value, e);
        }
    }
}

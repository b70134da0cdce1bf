package io.sparkafka.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * CPU time and peak RSS of this JVM from /proc, as the Python workers take theirs from getrusage:
 * user + system time of every thread of the process (/proc/self/stat fields 14 and 15, in clock ticks)
 * and the high-water mark of the resident set (VmHWM in /proc/self/status; VmRSS for the resident set now).
 */
final class ProcStats {
    private ProcStats() {
    }

    /** User + system CPU seconds of the whole process so far; {@code clockTicks} is sysconf(_SC_CLK_TCK). */
    static double cpuSeconds(long clockTicks) {
        String stat = read("/proc/self/stat");
        // the command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" ");
        long utime = Long.parseLong(fields[11]);  // field 14 of proc(5); fields[0] is field 3 (state)
        long stime = Long.parseLong(fields[12]);  // field 15
        return (utime + stime) / (double) clockTicks;
    }

    /** The process's peak resident set so far, in MB (1024 * 1024 bytes, as the workers' ru_maxrss / 1024). */
    static double peakRssMb() {
        return statusMb("VmHWM:");
    }

    /** The process's resident set now, in MB (VmRSS). */
    static double rssMb() {
        return statusMb("VmRSS:");
    }

    private static double statusMb(String field) {
        for (String line : read("/proc/self/status").split("\n")) {
            if (line.startsWith(field)) {
                String kb = line.substring(field.length()).trim().split("\\s+")[0];
                return Long.parseLong(kb) / 1024.0;
            }
        }
        return Double.NaN;
    }

    private static String read(String path) {
        try {
            return Files.readString(Path.of(path));
        } catch (IOException e) {
            throw new IllegalStateException("cannot read " + path + ": " + e, e);
        }
    }
}

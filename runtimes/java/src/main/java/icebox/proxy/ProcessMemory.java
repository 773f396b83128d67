package icebox.proxy;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/** What the whole process holds and has used, as the reclaim extension reports it. */
final class ProcessMemory {
    private static final Path SMAPS_ROLLUP = Path.of("/proc/self/smaps_rollup");
    private static final Path TASKS = Path.of("/proc/self/task");

    private ProcessMemory() {}

    /**
     * Unique set size in bytes: Private_Clean + Private_Dirty of /proc/self/smaps_rollup, i.e.
     * the memory that leaves the node when this process does. -1 where /proc has no rollup
     * (not Linux, or a kernel older than 4.14).
     */
    static long ussBytes() {
        String text;
        try {
            text = new String(Files.readAllBytes(SMAPS_ROLLUP), StandardCharsets.US_ASCII);
        } catch (IOException | UnsupportedOperationException e) {
            return -1;
        }
        return (kibOf(text, "Private_Clean:") + kibOf(text, "Private_Dirty:")) * 1024;
    }

    /** The value of the "Field:   123 kB" line, 0 when it is absent. */
    static long kibOf(String text, String field) {
        int at = text.indexOf(field);
        if (at < 0) {
            return 0;
        }
        long kib = 0;
        for (int i = at + field.length(); i < text.length(); i++) {
            char c = text.charAt(i);
            if (c >= '0' && c <= '9') {
                kib = kib * 10 + (c - '0');
            } else if (c != ' ' && c != '\t') {
                break;
            }
        }
        return kib;
    }

    /**
     * A reading of the process's CPU clock: nanoseconds per thread from
     * /proc/self/task/N/schedstat (nanosecond resolution, and it covers the VM thread, where
     * Serial collects), or the OperatingSystemMXBean's process CPU time where that is missing
     * (on Linux it counts in 10 ms clock ticks, as coarse as a whole reclaim).
     */
    static final class CpuClock {
        private final Map<String, Long> threads;
        private final long process;

        private CpuClock(Map<String, Long> threads, long process) {
            this.threads = threads;
            this.process = process;
        }

        static CpuClock read() {
            Map<String, Long> threads = threadCpuNanos();
            return new CpuClock(threads, threads == null ? osProcessCpuNanos() : -1);
        }

        /**
         * CPU nanoseconds used since this reading, or -1 if unknown. Per thread, so a thread
         * that exits meanwhile (HotSpot stops idle compiler threads, the proxy ends connection
         * threads) does not take its whole past with it, only its share of the interval.
         */
        long elapsedNanos() {
            if (threads == null) {
                long now = osProcessCpuNanos();
                return process < 0 || now < 0 ? -1 : now - process;
            }
            Map<String, Long> now = threadCpuNanos();
            if (now == null) {
                return -1;
            }
            long used = 0;
            for (Map.Entry<String, Long> t : now.entrySet()) {
                used += t.getValue() - threads.getOrDefault(t.getKey(), 0L);
            }
            return used;
        }
    }

    /** Thread id to CPU nanoseconds, or null without per-thread schedstat. */
    private static Map<String, Long> threadCpuNanos() {
        Map<String, Long> out = new HashMap<>();
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(TASKS)) {
            for (Path task : tasks) {
                String stat;
                try {
                    stat = new String(Files.readAllBytes(task.resolve("schedstat")),
                            StandardCharsets.US_ASCII);
                } catch (NoSuchFileException exited) {
                    continue;
                }
                int end = stat.indexOf(' ');
                out.put(task.getFileName().toString(),
                        Long.parseLong(end < 0 ? stat.trim() : stat.substring(0, end)));
            }
            return out;
        } catch (IOException | NumberFormatException | UnsupportedOperationException e) {
            return null;
        }
    }

    private static long osProcessCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return -1;
    }
}

package icebox.functions;

import com.google.gson.JsonObject;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Arrays;

/**
 * time (Desiccant's Java set): returns the current time, the lightest function of the set,
 * whose memory is almost all JVM. Besides the wall clock it reports the process's age and CPU
 * time, and reads the monotonic clock {@code samples} times to report its resolution, so one
 * invocation does a fixed, tunable amount of work.
 */
public final class Time {
    private Time() {}

    public static JsonObject main(JsonObject args) {
        int samples = Params.integer(args, "samples", 500_000, 2, 4_000_000);
        long[] reads = new long[samples];
        for (int i = 0; i < samples; i++) {
            reads[i] = System.nanoTime();
        }
        long span = reads[samples - 1] - reads[0];
        // Turn the reads into the steps between them, in place, from the end.
        boolean monotonic = true;
        long resolution = Long.MAX_VALUE;
        for (int i = samples - 1; i > 0; i--) {
            long step = reads[i] - reads[i - 1];
            monotonic &= step >= 0;
            if (step > 0 && step < resolution) {
                resolution = step;
            }
            reads[i] = step;
        }
        long[] steps = Arrays.copyOfRange(reads, 1, samples);
        Arrays.sort(steps);

        Instant now = Instant.now();
        ProcessHandle.Info info = ProcessHandle.current().info();
        JsonObject result = new JsonObject();
        result.addProperty("now", DateTimeFormatter.ISO_OFFSET_DATE_TIME.format(now.atOffset(ZoneOffset.UTC)));
        result.addProperty("epoch_ms", now.toEpochMilli());
        info.startInstant().ifPresent(start -> result.addProperty("uptime_ms",
                Duration.between(start, now).toMillis()));
        info.totalCpuDuration().ifPresent(cpu -> result.addProperty("cpu_ms", cpu.toMillis()));
        result.addProperty("samples", samples);
        result.addProperty("monotonic", monotonic);
        if (resolution != Long.MAX_VALUE) {
            result.addProperty("resolution_ns", resolution);
        }
        result.addProperty("median_step_ns", steps[steps.length / 2]);
        result.addProperty("span_ns", span);
        return result;
    }
}

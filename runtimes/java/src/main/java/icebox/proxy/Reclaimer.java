package icebox.proxy;

import com.google.gson.JsonArray;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.lang.management.MemoryUsage;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * POST /icebox/reclaim (Desiccant): gives an idle instance's frozen garbage back to the OS.
 *
 * <p>Variants:
 * <ul>
 *   <li>{@code shrink} (default): lower MinHeapFreeRatio / MaxHeapFreeRatio to
 *       {@link #RECLAIM_RATIOS}, run full collections ({@code System.gc()}) until the committed
 *       heap stops shrinking, then trim the C heap ({@link NativeHeap}). The ratios stay low
 *       while the instance is idle (a collection then, e.g. /icebox/stats?gc=1, keeps it
 *       small) and are restored when work arrives: {@link #workStarted}.
 *   <li>{@code gc}: one {@code System.gc()} and nothing else, for comparison; it is also what
 *       the eager mode runs after every activation.
 * </ul>
 *
 * <p>Serial returns the heap it shrinks inside the collection (the pages are unmapped before
 * System.gc() returns) and the trim is synchronous, so USS settles at once. G1 (JDK 17)
 * uncommits on its service thread some tens of milliseconds later, so after G1 has shrunk the
 * heap the reclaim waits until USS has begun to fall and then stopped falling for
 * {@link #G1_QUIET_NANOS} (see {@link #settle}).
 *
 * <p>An activation that starts during a reclaim is not held up: it restores the ratios itself
 * and the reclaim stops after its current collection ({@code "abandoned": true}).
 */
final class Reclaimer {
    static final String SHRINK = "shrink";
    static final String GC = "gc";
    static final String DEFAULT_VARIANT = SHRINK;
    static final List<String> VARIANTS = List.of(SHRINK, GC);

    /** Free heap kept after a reclaim: none beyond 10 % of the live data (the heap's floor is -Xms). */
    static final FreeRatios.Pair RECLAIM_RATIOS = new FreeRatios.Pair(0, 10);

    /**
     * Collections are repeated while the committed heap shrinks and is above -Xms; with
     * -XX:-ShrinkHeapInSteps (runtime.json) one normally does it all. With Serial's default
     * +ShrinkHeapInSteps it takes four (see {@link FreeRatios#shrinkHeapInSteps}).
     */
    private static final int MAX_COLLECTIONS = 4;
    private static final long POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    /** G1's uncommit task starts about 20-60 ms after the collection (measured), in steps. */
    private static final long G1_QUIET_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final long SETTLE_LIMIT_NANOS = TimeUnit.SECONDS.toNanos(2);
    /** A G1 shrink smaller than this is not waited for (nor is a USS drop below it a start). */
    private static final long ASYNC_RELEASE_MIN = 1L << 20;
    private static final long PAGE = 4096;

    private final Object state = new Object();
    /** /init and /run requests in progress. */
    private int working;
    /** /init and /run requests started so far: a reclaim notices work that came and went. */
    private long started;
    /** The ratios to put back when work arrives; null while they are not lowered. */
    private FreeRatios.Pair restore;
    /** Why the last restore failed, if it did. */
    private String restoreError;

    /** Called as an /init or /run starts: the instance is thawed for work. */
    void workStarted() {
        synchronized (state) {
            working++;
            started++;
            if (restore != null) {
                FreeRatios.Pair original = restore;
                restore = null;
                try {
                    FreeRatios.set(original);
                } catch (RuntimeException e) {
                    // Not expected (these values were in force before); the activation must run
                    // regardless, so this is only reported through /icebox/stats.
                    restoreError = Throwables.describe(e);
                }
            }
        }
    }

    void workFinished() {
        synchronized (state) {
            working--;
        }
    }

    /** For /icebox/stats: the ratios in force and whether a reclaim left them lowered. */
    void describe(JsonObject details) {
        FreeRatios.Pair pending;
        String error;
        synchronized (state) {
            pending = restore;
            error = restoreError;
        }
        details.add("heap_free_ratios", FreeRatios.current().toJson());
        details.add("heap_free_ratios_to_restore",
                pending == null ? JsonNull.INSTANCE : pending.toJson());
        if (error != null) {
            details.addProperty("heap_free_ratios_restore_error", error);
        }
    }

    /** Runs one reclaim; {@code variant} must be one of {@link #VARIANTS}. */
    synchronized JsonObject reclaim(String variant) {
        boolean shrink = variant.equals(SHRINK);
        MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
        String collector = collector();
        long startedBefore;
        synchronized (state) {
            startedBefore = started;
        }

        long ussBefore = ProcessMemory.ussBytes();
        ProcessMemory.CpuClock cpu = ProcessMemory.CpuClock.read();
        long wallStart = System.nanoTime();
        MemoryUsage heap = memory.getHeapMemoryUsage();
        long committedBefore = heap.getCommitted();
        // Serial never shrinks below -Xms: at that floor another collection cannot help.
        long floor = heap.getInit();

        // Damped shrinking only stops after 4 collections; it may shrink nothing on the first.
        boolean inSteps = shrink && collector.equals("serial") && FreeRatios.shrinkHeapInSteps();
        boolean lowered = shrink && lowerRatiosWhileIdle(startedBefore);
        boolean abandoned = shrink && !lowered;
        int collections = 0;
        long committed = committedBefore;
        JsonArray steps = new JsonArray();
        while (!abandoned) {
            System.gc();
            collections++;
            long now = memory.getHeapMemoryUsage().getCommitted();
            steps.add(now);
            boolean shrank = now < committed;
            committed = now;
            if (!shrink || (!shrank && !inSteps) || committed <= floor
                    || collections == MAX_COLLECTIONS) {
                break;
            }
            abandoned = workSince(startedBefore);
        }
        long liveBytes = memory.getHeapMemoryUsage().getUsed();
        // Read before the trim: G1's uncommit, if any, is measured from here.
        long ussAfterCollection = ProcessMemory.ussBytes();

        JsonObject details = new JsonObject();
        details.addProperty("collector", collector);
        details.addProperty("collections", collections);
        if (shrink && !abandoned && !workSince(startedBefore)) {
            try {
                details.addProperty("native_trim", NativeHeap.trim());
            } catch (IllegalStateException e) {
                details.addProperty("native_trim_error", e.getMessage());
            }
        }
        // Only G1 releases asynchronously; elsewhere one re-read confirms USS is final.
        boolean asyncUncommit = collector.equals("g1")
                && committedBefore - committed >= ASYNC_RELEASE_MIN;
        long[] settled = settle(ussAfterCollection, asyncUncommit);
        long wallNanos = System.nanoTime() - wallStart;
        long cpuNanos = cpu.elapsedNanos();

        abandoned |= workSince(startedBefore);
        details.addProperty("abandoned", abandoned);
        details.addProperty("heap_committed_before_bytes", committedBefore);
        details.addProperty("heap_committed_after_bytes", committed);
        details.add("heap_committed_after_each_collection_bytes", steps);
        details.addProperty("settle_polls", settled[1]);
        describe(details);

        JsonObject out = new JsonObject();
        out.addProperty("uss_before", ussBefore);
        out.addProperty("uss_after", settled[0]);
        out.addProperty("live_bytes", liveBytes);
        out.addProperty("cpu_ms", cpuNanos < 0 ? -1 : cpuNanos / 1e6);
        out.addProperty("wall_ms", wallNanos / 1e6);
        out.addProperty("variant", variant);
        out.add("details", details);
        return out;
    }

    /** Lowers the ratios unless an activation has started since {@code startedBefore}. */
    private boolean lowerRatiosWhileIdle(long startedBefore) {
        synchronized (state) {
            if (working > 0 || started != startedBefore) {
                return false;
            }
            if (restore == null) {
                FreeRatios.Pair original = FreeRatios.current();
                FreeRatios.set(RECLAIM_RATIOS);
                restore = original;
            }
            return true;
        }
    }

    private boolean workSince(long startedBefore) {
        synchronized (state) {
            return working > 0 || started != startedBefore;
        }
    }

    /**
     * Re-reads USS every millisecond, starting from {@code uss} as read right after the
     * collections, until it has stopped falling, bounded by {@link #SETTLE_LIMIT_NANOS}
     * (reached only if G1's uncommit is that late, or had already ended before that read);
     * returns {USS, re-reads}. Synchronous release: until one re-read finds it no lower by a
     * page. Asynchronous (G1 shrank the heap): first until it has fallen by
     * {@link #ASYNC_RELEASE_MIN} (the uncommit has begun), then until it has not fallen for
     * {@link #G1_QUIET_NANOS} (G1 uncommits in steps).
     */
    private static long[] settle(long uss, boolean async) {
        if (uss < 0) {
            return new long[] {uss, 0};
        }
        long start = System.nanoTime();
        long quietSince = start;
        long polls = 0;
        long began = async ? uss - ASYNC_RELEASE_MIN : Long.MAX_VALUE;
        boolean released = !async;
        for (;;) {
            LockSupport.parkNanos(POLL_NANOS);
            long latest = ProcessMemory.ussBytes();
            long now = System.nanoTime();
            polls++;
            boolean fell = latest <= uss - PAGE;
            if (fell) {
                quietSince = now;
            }
            uss = latest;
            released |= uss <= began;
            boolean quiet = !fell && now - quietSince >= (async ? G1_QUIET_NANOS : 0);
            if ((released && quiet) || now - start >= SETTLE_LIMIT_NANOS) {
                return new long[] {uss, polls};
            }
        }
    }

    /** The collector in use, from the names of its MXBeans; "other" for ZGC, Shenandoah... */
    static String collector() {
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            String name = gc.getName();
            if (name.equals("MarkSweepCompact") || name.equals("Copy")) {
                return "serial";
            }
            if (name.startsWith("G1 ")) {
                return "g1";
            }
            if (name.startsWith("PS ")) {
                return "parallel";
            }
        }
        return "other";
    }
}

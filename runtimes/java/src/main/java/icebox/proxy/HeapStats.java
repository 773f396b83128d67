package icebox.proxy;

import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.lang.management.MemoryUsage;

/**
 * The /icebox/stats document. Kept apart so java.lang.management is only loaded when iceboxd
 * actually asks for statistics.
 */
final class HeapStats {
    private HeapStats() {}

    static JsonObject collect(boolean fullGc) {
        if (fullGc) {
            // With the Serial collector this is a full, compacting, stop-the-world collection.
            System.gc();
        }
        MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
        MemoryUsage heap = memory.getHeapMemoryUsage();
        MemoryUsage nonHeap = memory.getNonHeapMemoryUsage();

        long gcCount = 0;
        long gcTimeMs = 0;
        JsonObject collectors = new JsonObject();
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            // -1 means "undefined" for the collector; it contributes nothing.
            long count = Math.max(0, gc.getCollectionCount());
            long time = Math.max(0, gc.getCollectionTime());
            gcCount += count;
            gcTimeMs += time;
            JsonObject c = new JsonObject();
            c.addProperty("count", count);
            c.addProperty("time_ms", time);
            collectors.add(gc.getName(), c);
        }

        JsonObject pools = new JsonObject();
        for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
            if (pool.getType() != MemoryType.HEAP) {
                continue;
            }
            MemoryUsage usage = pool.getUsage();
            JsonObject p = new JsonObject();
            p.addProperty("used_bytes", usage.getUsed());
            p.addProperty("committed_bytes", usage.getCommitted());
            p.addProperty("max_bytes", usage.getMax());
            pools.add(pool.getName(), p);
        }

        JsonObject details = new JsonObject();
        details.addProperty("heap_max_bytes", heap.getMax());
        details.addProperty("non_heap_used_bytes", nonHeap.getUsed());
        details.addProperty("non_heap_committed_bytes", nonHeap.getCommitted());
        details.add("collectors", collectors);
        details.add("pools", pools);

        JsonObject stats = new JsonObject();
        stats.addProperty("runtime", "java");
        stats.addProperty("heap_used_bytes", heap.getUsed());
        stats.addProperty("heap_committed_bytes", heap.getCommitted());
        stats.addProperty("gc_count", gcCount);
        stats.addProperty("gc_time_ms", gcTimeMs);
        if (fullGc) {
            stats.addProperty("live_bytes", heap.getUsed());
        } else {
            stats.add("live_bytes", JsonNull.INSTANCE);
        }
        stats.add("details", details);
        return stats;
    }
}

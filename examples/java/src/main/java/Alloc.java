import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.List;

/**
 * Allocates {@code mb} MiB (default 64) as 1 KiB objects, keeps them all reachable until the
 * last one exists, and returns a summary; the objects are garbage once it returns. Deploy
 * with main "Alloc". Shows how much memory an instance keeps after a burst of garbage.
 */
public class Alloc {
    private static final int OBJECT_BYTES = 1024;
    /** Keeps the object count within an int. */
    private static final int MAX_MB = 1 << 20;

    public static JsonObject main(JsonObject args) {
        int mb = args.has("mb") ? args.get("mb").getAsInt() : 64;
        if (mb < 0 || mb > MAX_MB) {
            throw new IllegalArgumentException(
                    "mb must be between 0 and " + MAX_MB + ", got " + mb);
        }
        int count = mb * (1024 * 1024 / OBJECT_BYTES);
        List<byte[]> objects = new ArrayList<>(count);
        long checksum = 0;
        for (int i = 0; i < count; i++) {
            byte[] object = new byte[OBJECT_BYTES];
            // Read back below, so the allocations cannot be optimised away.
            object[0] = (byte) i;
            objects.add(object);
        }
        for (byte[] object : objects) {
            checksum += object[0];
        }
        Runtime rt = Runtime.getRuntime();
        long heapUsedAtPeak = rt.totalMemory() - rt.freeMemory();

        JsonObject result = new JsonObject();
        result.addProperty("allocated_mb", mb);
        result.addProperty("objects", count);
        result.addProperty("object_bytes", OBJECT_BYTES);
        result.addProperty("checksum", checksum);
        result.addProperty("heap_used_bytes_at_peak", heapUsedAtPeak);
        return result;
    }
}

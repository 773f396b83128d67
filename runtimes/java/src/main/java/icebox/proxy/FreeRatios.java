package icebox.proxy;

import com.google.gson.JsonObject;
import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;

/**
 * The JVM's manageable heap-sizing flags MinHeapFreeRatio / MaxHeapFreeRatio, read and written
 * in process through the HotSpotDiagnosticMXBean.
 *
 * <p>After a full collection Serial (and G1) resize the heap so that between Min% and Max% of
 * it is free. Lowering both before a collection makes that collection give back nearly all
 * free heap; keeping them low while the instance works would make every later full collection
 * shrink the heap and the next allocations regrow it, so they are restored before work.
 */
final class FreeRatios {
    private static final String MIN = "MinHeapFreeRatio";
    private static final String MAX = "MaxHeapFreeRatio";

    /** One setting of both flags, in percent. */
    record Pair(int min, int max) {
        JsonObject toJson() {
            JsonObject o = new JsonObject();
            o.addProperty("min", min);
            o.addProperty("max", max);
            return o;
        }
    }

    private FreeRatios() {}

    private static HotSpotDiagnosticMXBean bean() {
        // Cached by the platform; also loads libmanagement_ext, which NativeHeap relies on.
        return ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
    }

    /**
     * Whether Serial damps shrinking (-XX:+ShrinkHeapInSteps, HotSpot's default): the first
     * full collection after the heap grew then shrinks it by 0 % of the excess, the next ones
     * by 10 %, 40 % and 100 %. runtime.json turns it off; the reclaim copes either way.
     */
    static boolean shrinkHeapInSteps() {
        return Boolean.parseBoolean(bean().getVMOption("ShrinkHeapInSteps").getValue());
    }

    static Pair current() {
        HotSpotDiagnosticMXBean bean = bean();
        return new Pair(Integer.parseInt(bean.getVMOption(MIN).getValue()),
                Integer.parseInt(bean.getVMOption(MAX).getValue()));
    }

    /**
     * Sets both flags. HotSpot refuses any single write that would leave Min above Max, so
     * the order depends on the direction of the change.
     */
    static void set(Pair target) {
        HotSpotDiagnosticMXBean bean = bean();
        if (target.min() <= current().max()) {
            bean.setVMOption(MIN, Integer.toString(target.min()));
            bean.setVMOption(MAX, Integer.toString(target.max()));
        } else {
            bean.setVMOption(MAX, Integer.toString(target.max()));
            bean.setVMOption(MIN, Integer.toString(target.min()));
        }
    }
}

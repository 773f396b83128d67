package icebox.proxy;

import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The JDK's process-wide random state that /icebox/restored reseeds, as far as it is reachable.
 *
 * <p>Instances restored from one snapshot share every generator the JVM had made before it.
 * Only the package runtime.json opens ({@code --add-opens java.base/java.util}, needed for
 * {@link Environment} anyway) is reachable; no further module is opened for this. Reachable:
 * <ul>
 *   <li>{@code Random.seedUniquifier}: {@code new Random()} seeds itself with its next value
 *       xor {@code System.nanoTime()}; siblings would start from one value, restored at nearly
 *       the same nanosecond;
 *   <li>{@code SplittableRandom.defaultGen}: {@code new SplittableRandom()} takes its seed
 *       from it alone, so siblings would make identical generators;
 *   <li>{@code Collections.r}: the generator behind {@code Collections.shuffle(list)}, once
 *       made.
 * </ul>
 * Not reachable: {@code Math.random()}'s generator (in {@code java.lang}, not opened; made on
 * first use, from {@code new Random()}, so one made after the restore differs per instance)
 * and {@code ThreadLocalRandom}'s seeds (in {@code java.util.concurrent}, not opened).
 */
final class JdkGenerators {
    private JdkGenerators() {}

    /**
     * Reseeds what is reachable from the 32 seed bytes (the same seed gives the same state).
     *
     * @return what was reseeded, for the reply
     */
    static List<String> reseed(byte[] seed) {
        ByteBuffer words = ByteBuffer.wrap(seed);
        List<String> reseeded = new ArrayList<>();
        // Zero would stay zero: seedUniquifier() multiplies the previous value.
        if (setAtomic(Random.class, "seedUniquifier", words.getLong() | 1L)) {
            reseeded.add("new Random()");
        }
        if (setAtomic(java.util.SplittableRandom.class, "defaultGen", words.getLong())) {
            reseeded.add("new SplittableRandom()");
        }
        Object shuffle = read(java.util.Collections.class, "r");
        if (shuffle instanceof Random) {
            ((Random) shuffle).setSeed(words.getLong());
            reseeded.add("Collections.shuffle");
        }
        return reseeded;
    }

    private static boolean setAtomic(Class<?> owner, String field, long value) {
        Object atomic = read(owner, field);
        if (!(atomic instanceof AtomicLong)) {
            return false;
        }
        ((AtomicLong) atomic).set(value);
        return true;
    }

    /** A static field's value, or null when this JDK has no such field or does not open it. */
    private static Object read(Class<?> owner, String name) {
        try {
            Field field = owner.getDeclaredField(name);
            field.setAccessible(true);
            return field.get(null);
        } catch (ReflectiveOperationException | RuntimeException unreachable) {
            return null;
        }
    }
}

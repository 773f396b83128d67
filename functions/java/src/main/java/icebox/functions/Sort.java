package icebox.functions;

import com.google.gson.JsonObject;
import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * sort (Desiccant's Java set): sorts an array of {@code n} pseudo-random integers drawn from
 * {@code seed} (dual-pivot quicksort, {@link Arrays#sort(int[])}), checks the order, and
 * returns order statistics and a position-weighted checksum that only the sorted permutation
 * of the data has.
 */
public final class Sort {
    private Sort() {}

    public static JsonObject main(JsonObject args) {
        int n = Params.integer(args, "n", 1_000_000, 1, 8_000_000);
        long seed = Params.longValue(args, "seed", 42, 0, Long.MAX_VALUE);
        int[] data = generate(n, seed);
        Arrays.sort(data);
        boolean sorted = true;
        for (int i = 1; i < n; i++) {
            sorted &= data[i - 1] <= data[i];
        }
        JsonObject result = new JsonObject();
        result.addProperty("n", n);
        result.addProperty("sorted", sorted);
        result.addProperty("min", data[0]);
        result.addProperty("median", data[n / 2]);
        result.addProperty("max", data[n - 1]);
        result.addProperty("checksum", checksum(data));
        return result;
    }

    /** The unsorted input: uniform over all ints, so duplicates are rare but possible. */
    static int[] generate(int n, long seed) {
        return new SplittableRandom(seed).ints(n).toArray();
    }

    /** Sum of (i + 1) * data[i], wrapping: equal for two arrays iff (almost surely) same order. */
    static long checksum(int[] data) {
        long sum = 0;
        for (int i = 0; i < data.length; i++) {
            sum += (i + 1L) * data[i];
        }
        return sum;
    }
}

package icebox.functions;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * mapreduce (Desiccant's Java set; a mapper and a reducer function): counts words in a
 * map-reduce fashion. A text of {@code words} words over a Zipf-distributed vocabulary of
 * {@code vocabulary} words is generated from {@code seed} and split into {@code mappers} line-
 * aligned splits. Map: each mapper tokenises its split and counts its words (the usual in-mapper
 * combiner), partitioned by key hash into {@code reducers} partitions. Shuffle: partition r of
 * every mapper goes to reducer r. Reduce: each reducer merges its partitions. Finally the
 * reducers' outputs are merged into the top words.
 */
public final class MapReduce {
    private MapReduce() {}

    public static JsonObject main(JsonObject args) {
        int words = Params.integer(args, "words", 250_000, 1, 10_000_000);
        int vocabulary = Params.integer(args, "vocabulary", 20_000, 1, 1_000_000);
        int mappers = Params.integer(args, "mappers", 8, 1, 256);
        int reducers = Params.integer(args, "reducers", 4, 1, 256);
        long seed = Params.longValue(args, "seed", 42, 0, Long.MAX_VALUE);

        String text = generateText(words, vocabulary, seed);
        List<List<Map<String, Integer>>> mapped = new ArrayList<>();
        for (int[] split : splits(text, mappers)) {
            mapped.add(map(text, split[0], split[1], reducers));
        }
        List<Map<String, Integer>> reduced = new ArrayList<>();
        for (int r = 0; r < reducers; r++) {
            List<Map<String, Integer>> shuffled = new ArrayList<>();
            for (List<Map<String, Integer>> partitions : mapped) {
                shuffled.add(partitions.get(r));
            }
            reduced.add(reduce(shuffled));
        }

        long total = 0;
        int distinct = 0;
        List<Map.Entry<String, Integer>> all = new ArrayList<>();
        for (Map<String, Integer> out : reduced) {
            distinct += out.size();
            for (Map.Entry<String, Integer> e : out.entrySet()) {
                total += e.getValue();
                all.add(e);
            }
        }
        all.sort(Map.Entry.<String, Integer>comparingByValue().reversed().thenComparing(Map.Entry.comparingByKey()));
        JsonArray top = new JsonArray();
        for (Map.Entry<String, Integer> e : all.subList(0, Math.min(10, all.size()))) {
            JsonObject o = new JsonObject();
            o.addProperty("word", e.getKey());
            o.addProperty("count", e.getValue());
            top.add(o);
        }
        JsonObject result = new JsonObject();
        result.addProperty("words", total);
        result.addProperty("distinct", distinct);
        result.addProperty("text_chars", text.length());
        result.addProperty("mappers", mappers);
        result.addProperty("reducers", reducers);
        result.add("top", top);
        return result;
    }

    /** Lines of 12 words; word ranks follow Zipf's law (exponent 1) by inverse-CDF search. */
    static String generateText(int words, int vocabulary, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        String[] vocab = new String[vocabulary];
        for (int i = 0; i < vocabulary; i++) {
            vocab[i] = word(i);
        }
        double[] cdf = new double[vocabulary];
        double sum = 0;
        for (int i = 0; i < vocabulary; i++) {
            sum += 1.0 / (i + 1);
            cdf[i] = sum;
        }
        StringBuilder text = new StringBuilder(words * 8);
        for (int i = 0; i < words; i++) {
            double u = random.nextDouble() * sum;
            int lo = 0;
            int hi = vocabulary - 1;
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (cdf[mid] < u) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            String w = vocab[lo];
            // Sentence-initial capitals and punctuation, for the tokenizer to normalise.
            if (i % 12 == 0 && !w.isEmpty()) {
                w = Character.toUpperCase(w.charAt(0)) + w.substring(1);
            }
            text.append(w).append(i % 12 == 11 ? ".\n" : i % 5 == 4 ? ", " : " ");
        }
        return text.toString();
    }

    private static final String[] SYLLABLES = {"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze",
        "pa", "do", "fu", "gi", "ha", "ju"};

    /**
     * The word of a rank: rank + 1 in bijective base 15 with a syllable per digit. Every rank
     * gets its own word, and the frequent (low) ranks get the short words, as in real text.
     */
    static String word(int rank) {
        StringBuilder w = new StringBuilder();
        for (long n = rank + 1L; n > 0; n = (n - 1) / SYLLABLES.length) {
            w.insert(0, SYLLABLES[(int) ((n - 1) % SYLLABLES.length)]);
        }
        return w.toString();
    }

    /** Split boundaries at line ends, as an input format would cut a file. */
    static List<int[]> splits(String text, int count) {
        List<int[]> out = new ArrayList<>();
        int start = 0;
        for (int i = 1; i <= count && start < text.length(); i++) {
            int end = i == count ? text.length() : Math.max(start, (int) ((long) text.length() * i / count));
            while (end > 0 && end < text.length() && text.charAt(end - 1) != '\n') {
                end++;
            }
            if (end > start) {
                out.add(new int[] {start, end});
            }
            start = end;
        }
        return out;
    }

    /** One mapper: lower-cased letter runs are words; counts partitioned by key hash. */
    static List<Map<String, Integer>> map(String text, int from, int to, int reducers) {
        List<Map<String, Integer>> partitions = new ArrayList<>(reducers);
        for (int r = 0; r < reducers; r++) {
            partitions.add(new HashMap<>());
        }
        int i = from;
        while (i < to) {
            while (i < to && !Character.isLetter(text.charAt(i))) {
                i++;
            }
            int start = i;
            while (i < to && Character.isLetter(text.charAt(i))) {
                i++;
            }
            if (i > start) {
                String word = text.substring(start, i).toLowerCase(Locale.ROOT);
                partitions.get(Math.floorMod(word.hashCode(), reducers)).merge(word, 1, Integer::sum);
            }
        }
        return partitions;
    }

    static Map<String, Integer> reduce(List<Map<String, Integer>> inputs) {
        Map<String, Integer> out = new HashMap<>();
        for (Map<String, Integer> in : inputs) {
            in.forEach((word, count) -> out.merge(word, count, Integer::sum));
        }
        return out;
    }
}

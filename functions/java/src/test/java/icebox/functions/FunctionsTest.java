package icebox.functions;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** Runs every function with its input A from functions.json and checks the answer independently. */
class FunctionsTest {
    private static final JsonArray MANIFEST = readManifest();

    private static JsonArray readManifest() {
        Path file = Path.of(System.getProperty("basedir", ".")).resolve("functions.json");
        try {
            return JsonParser.parseString(Files.readString(file)).getAsJsonArray();
        } catch (IOException e) {
            throw new IllegalStateException("cannot read " + file.toAbsolutePath(), e);
        }
    }

    private static JsonObject entry(String name) {
        for (JsonElement e : MANIFEST) {
            if (e.getAsJsonObject().get("name").getAsString().equals(name)) {
                return e.getAsJsonObject();
            }
        }
        throw new AssertionError("no function " + name + " in functions.json");
    }

    private static JsonObject inputA(String name) {
        return entry(name).getAsJsonObject("inputs").getAsJsonObject("A").deepCopy();
    }

    private static int intA(String name, String key) {
        return inputA(name).get(key).getAsInt();
    }

    @Test
    void manifestNamesAnEntryPointForEveryFunction() throws Exception {
        assertEquals(7, MANIFEST.size());
        for (JsonElement e : MANIFEST) {
            JsonObject f = e.getAsJsonObject();
            assertEquals("java/target/icebox-functions.jar", f.get("path").getAsString());
            assertEquals("java:17", f.get("kind").getAsString());
            assertNotNull(f.getAsJsonObject("inputs").get("B"));
            Method main = Class.forName(f.get("main").getAsString()).getMethod("main", JsonObject.class);
            assertTrue(Modifier.isStatic(main.getModifiers()));
            assertEquals(JsonObject.class, main.getReturnType());
        }
    }

    @Test
    void time() {
        JsonObject r = Time.main(inputA("time"));
        assertEquals(intA("time", "samples"), r.get("samples").getAsInt());
        assertTrue(r.get("monotonic").getAsBoolean());
        assertTrue(r.get("resolution_ns").getAsLong() > 0);
        long skew = Math.abs(Instant.parse(r.get("now").getAsString()).toEpochMilli() - System.currentTimeMillis());
        assertTrue(skew < 60_000);
    }

    @Test
    void sortMatchesAnIndependentRadixSort() {
        JsonObject in = inputA("sort");
        JsonObject r = Sort.main(in);
        int[] data = Sort.generate(in.get("n").getAsInt(), in.get("seed").getAsLong());
        // LSD radix sort on the bits with the sign flipped: no comparisons, no Arrays.sort.
        int[] buf = new int[data.length];
        for (int shift = 0; shift < 32; shift += 8) {
            int[] count = new int[257];
            for (int v : data) {
                count[((v ^ Integer.MIN_VALUE) >>> shift & 0xff) + 1]++;
            }
            for (int i = 0; i < 256; i++) {
                count[i + 1] += count[i];
            }
            for (int v : data) {
                buf[count[(v ^ Integer.MIN_VALUE) >>> shift & 0xff]++] = v;
            }
            int[] t = data;
            data = buf;
            buf = t;
        }
        assertTrue(r.get("sorted").getAsBoolean());
        assertEquals(Sort.checksum(data), r.get("checksum").getAsLong());
        assertEquals(data[0], r.get("min").getAsInt());
        assertEquals(data[data.length / 2], r.get("median").getAsInt());
        assertEquals(data[data.length - 1], r.get("max").getAsInt());
    }

    @Test
    void fileHashMatchesTheDigestOfTheContentInMemory() throws Exception {
        JsonObject in = inputA("file-hash");
        Path tmp = Path.of(System.getProperty("java.io.tmpdir"));
        Set<Path> before = leftovers(tmp);
        JsonObject r = FileHash.main(in);
        int bytes = in.get("size_kb").getAsInt() * 1024;
        byte[] data = new byte[bytes];
        FileHash.ContentGenerator content = new FileHash.ContentGenerator(in.get("seed").getAsLong());
        byte[] block = new byte[FileHash.BLOCK];
        for (int off = 0; off < bytes; off += FileHash.BLOCK) {
            int len = Math.min(FileHash.BLOCK, bytes - off);
            content.fill(block, len);
            System.arraycopy(block, 0, data, off, len);
        }
        String expected = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
        assertEquals(expected, r.get("sha256").getAsString());
        assertEquals(bytes, r.get("size_bytes").getAsLong());
        assertEquals(before, leftovers(tmp), "the function deletes its file");
    }

    private static Set<Path> leftovers(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return new HashSet<>(s.filter(p -> p.getFileName().toString().startsWith("icebox-filehash-")).toList());
        }
    }

    @Test
    void imageResizeKeepsAspectAndColour() {
        JsonObject in = inputA("image-resize");
        JsonObject r = ImageResize.main(in);
        int w = in.get("width").getAsInt();
        int h = in.get("height").getAsInt();
        int tw = in.get("target_width").getAsInt();
        assertEquals(tw, r.get("width").getAsInt());
        assertEquals(Math.round((double) h * tw / w), r.get("height").getAsInt());
        assertTrue(r.get("jpeg_bytes").getAsInt() > 0 && r.get("png_bytes").getAsInt() > 0);
        // Downscaling averages pixels, so the mean colour survives (up to JPEG's loss).
        double[] source = ImageResize.meanColor(ImageResize.generate(w, h, in.get("seed").getAsLong()));
        assertEquals(source[0], r.get("mean_red").getAsDouble(), 3.0);
        assertEquals(source[1], r.get("mean_green").getAsDouble(), 3.0);
        assertEquals(source[2], r.get("mean_blue").getAsDouble(), 3.0);
        // The encoders produce images the decoder reads back at the new size.
        BufferedImage small = ImageResize.resize(ImageResize.generate(64, 48, 1), 16, 12);
        BufferedImage back = ImageResize.decode(ImageResize.png(small));
        assertEquals(16, back.getWidth());
        assertEquals(12, back.getHeight());
        assertEquals(small.getRGB(5, 5), back.getRGB(5, 5), "PNG is lossless");
        assertEquals(16, ImageResize.decode(ImageResize.jpeg(small, 0.9f)).getWidth());
    }

    @Test
    void hotelSearchingAgreesWithABruteForceSearch() {
        JsonObject in = inputA("hotel-searching");
        JsonObject r = HotelSearching.main(in);
        SplittableRandom random = new SplittableRandom(in.get("seed").getAsLong());
        List<HotelSearching.Hotel> hotels = HotelSearching.generateHotels(in.get("hotels").getAsInt(), random);
        HotelSearching.City city = new HotelSearching.City(hotels);
        long candidates = 0;
        long results = 0;
        long checksum = 0;
        for (int i = 0; i < in.get("queries").getAsInt(); i++) {
            HotelSearching.Query q = HotelSearching.randomQuery(random);
            List<HotelSearching.Match> brute = new ArrayList<>();
            for (HotelSearching.Hotel h : hotels) {
                double d = HotelSearching.distanceKm(q.lat(), q.lon(), h.lat(), h.lon());
                if (d <= q.radiusKm()) {
                    brute.add(new HotelSearching.Match(h, d, 0));
                }
            }
            assertEquals(ids(brute), ids(city.nearby(q)), "grid index finds exactly the hotels in range");
            candidates += brute.size();
            List<HotelSearching.Match> ranked = HotelSearching.rank(HotelSearching.rate(brute, q), q);
            results += ranked.size();
            for (int k = 0; k < ranked.size(); k++) {
                HotelSearching.Match m = ranked.get(k);
                checksum = checksum * 31 + m.hotel().id();
                assertTrue(m.totalPrice() <= q.maxPrice() * q.nights() && m.hotel().stars() >= q.minStars());
                if (k > 0 && q.sort().equals("price")) {
                    assertTrue(ranked.get(k - 1).totalPrice() <= m.totalPrice());
                }
            }
        }
        assertEquals(candidates, r.get("candidates").getAsLong());
        assertEquals(results, r.get("results").getAsLong());
        assertEquals(checksum, r.get("checksum").getAsLong());
        assertTrue(results > 0);
    }

    private static Set<Integer> ids(List<HotelSearching.Match> matches) {
        Set<Integer> s = new HashSet<>();
        matches.forEach(m -> s.add(m.hotel().id()));
        return s;
    }

    @Test
    void mapReduceMatchesASequentialCount() {
        JsonObject in = inputA("mapreduce");
        JsonObject r = MapReduce.main(in);
        String text = MapReduce.generateText(in.get("words").getAsInt(), in.get("vocabulary").getAsInt(),
                in.get("seed").getAsLong());
        Map<String, Integer> counts = new HashMap<>();
        for (String w : text.split("[^\\p{L}]+")) {
            if (!w.isEmpty()) {
                counts.merge(w.toLowerCase(Locale.ROOT), 1, Integer::sum);
            }
        }
        assertEquals(in.get("words").getAsLong(), r.get("words").getAsLong());
        assertEquals(counts.size(), r.get("distinct").getAsInt());
        JsonArray top = r.getAsJsonArray("top");
        List<Map.Entry<String, Integer>> expected = new ArrayList<>(counts.entrySet());
        expected.sort(Map.Entry.<String, Integer>comparingByValue().reversed().thenComparing(Map.Entry.comparingByKey()));
        for (int i = 0; i < top.size(); i++) {
            assertEquals(expected.get(i).getKey(), top.get(i).getAsJsonObject().get("word").getAsString());
            assertEquals(expected.get(i).getValue(), top.get(i).getAsJsonObject().get("count").getAsInt());
        }
        assertEquals("ka", MapReduce.word(0));
        assertEquals("kaka", MapReduce.word(15));
        // The partitioning does not change the answer.
        JsonObject one = in.deepCopy();
        one.addProperty("mappers", 1);
        one.addProperty("reducers", 1);
        assertEquals(r.get("top"), MapReduce.main(one).get("top"));
    }

    @Test
    void purchaseKeepsTheBooksBalanced() {
        JsonObject in = inputA("purchase");
        JsonObject r = Purchase.main(in);
        Purchase.Report report = Purchase.run(in.get("products").getAsInt(), in.get("customers").getAsInt(),
                in.get("transactions").getAsInt(), in.get("seed").getAsLong());
        assertEquals(report.receiptsChecksum, r.get("receipts_checksum").getAsLong(), "deterministic");
        assertEquals(report.transactions, report.completed + report.declined);
        assertEquals(report.completed, report.receipts.size());
        assertEquals(report.initialStock + report.unitsReordered - report.itemsSold, report.finalStock,
                "stock is conserved");
        assertEquals(report.revenueCents + report.taxCents, report.receiptsSumCents);
        long categories = 0;
        for (long c : report.categoryRevenue) {
            categories += c;
        }
        assertEquals(report.revenueCents, categories);
        long items = 0;
        for (Purchase.Receipt receipt : report.receipts) {
            items += receipt.items();
            assertTrue(receipt.totalCents() >= 0 && receipt.taxCents() <= receipt.totalCents());
        }
        assertEquals(report.itemsSold, items);
        assertTrue(report.declined > 0 && report.completed > report.declined);
        assertArrayEquals(new long[] {83, 0, 5}, new long[] {Purchase.basisPoints(1000, 825),
            Purchase.basisPoints(1000, 0), Purchase.basisPoints(100, 500)});
    }
}

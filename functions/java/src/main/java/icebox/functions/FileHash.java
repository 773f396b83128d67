package icebox.functions;

import com.google.gson.JsonObject;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.SplittableRandom;

/**
 * file-hash (Desiccant's Java set): calculates the hash of a file. The file, {@code size_kb}
 * KiB of pseudo-random bytes from {@code seed}, is first written under /tmp (the only writable
 * place in the sandbox), then read back in 64 KiB blocks through SHA-256, and deleted.
 */
public final class FileHash {
    static final int BLOCK = 64 * 1024;

    private FileHash() {}

    public static JsonObject main(JsonObject args) {
        int sizeKb = Params.integer(args, "size_kb", 8192, 1, 32768);
        long seed = Params.longValue(args, "seed", 42, 0, Long.MAX_VALUE);
        long bytes = sizeKb * 1024L;
        Path file = null;
        try {
            file = Files.createTempFile(Path.of(System.getProperty("java.io.tmpdir")), "icebox-filehash-", ".bin");
            try (OutputStream out = Files.newOutputStream(file)) {
                ContentGenerator content = new ContentGenerator(seed);
                byte[] block = new byte[BLOCK];
                for (long left = bytes; left > 0; left -= BLOCK) {
                    int len = (int) Math.min(BLOCK, left);
                    content.fill(block, len);
                    out.write(block, 0, len);
                }
            }
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            long read = 0;
            try (InputStream in = Files.newInputStream(file)) {
                byte[] block = new byte[BLOCK];
                for (int n; (n = in.read(block)) > 0; ) {
                    sha.update(block, 0, n);
                    read += n;
                }
            }
            JsonObject result = new JsonObject();
            result.addProperty("size_bytes", read);
            result.addProperty("sha256", HexFormat.of().formatHex(sha.digest()));
            return result;
        } catch (IOException e) {
            throw new UncheckedIOException("file-hash: " + e.getMessage(), e);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JVM", e);
        } finally {
            if (file != null) {
                try {
                    Files.deleteIfExists(file);
                } catch (IOException ignored) {
                    // /tmp is the instance's own and goes away with it.
                }
            }
        }
    }

    /** The file's bytes, produced block by block so the whole file is never in memory. */
    static final class ContentGenerator {
        private final SplittableRandom random;

        ContentGenerator(long seed) {
            random = new SplittableRandom(seed);
        }

        void fill(byte[] block, int len) {
            for (int i = 0; i < len; i += 8) {
                long v = random.nextLong();
                for (int j = i; j < Math.min(len, i + 8); j++, v >>>= 8) {
                    block[j] = (byte) v;
                }
            }
        }
    }
}

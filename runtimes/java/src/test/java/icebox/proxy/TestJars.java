package icebox.proxy;

import com.google.gson.JsonObject;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.Map;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

/** Builds action jars for the tests: real Java sources compiled against the proxy's Gson. */
final class TestJars {
    private TestJars() {}

    /** Location of the Gson jar (or classes) the proxy itself was compiled and runs with. */
    static Path gson() {
        return location(JsonObject.class);
    }

    static Path proxyClasses() {
        return location(Main.class);
    }

    private static Path location(Class<?> cls) {
        try {
            return Path.of(cls.getProtectionDomain().getCodeSource().getLocation().toURI());
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * Compiles {@code sources} (class name to Java source) and returns them packaged as a jar.
     */
    static byte[] compile(Map<String, String> sources) {
        Path dir = null;
        try {
            dir = Files.createTempDirectory("icebox-test-action");
            Path src = Files.createDirectories(dir.resolve("src"));
            Path out = Files.createDirectories(dir.resolve("out"));
            String[] args = new String[sources.size() + 4];
            args[0] = "-d";
            args[1] = out.toString();
            args[2] = "-cp";
            args[3] = gson().toString();
            int i = 4;
            for (Map.Entry<String, String> e : sources.entrySet()) {
                Path file = src.resolve(e.getKey().replace('.', File.separatorChar) + ".java");
                Files.createDirectories(file.getParent());
                Files.writeString(file, e.getValue());
                args[i++] = file.toString();
            }
            JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
            if (javac.run(null, null, null, args) != 0) {
                throw new IllegalStateException("test action does not compile");
            }
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            try (JarOutputStream jar = new JarOutputStream(bytes);
                    Stream<Path> files = Files.walk(out)) {
                for (Path f : (Iterable<Path>) files.filter(Files::isRegularFile)::iterator) {
                    jar.putNextEntry(new JarEntry(out.relativize(f).toString()
                            .replace(File.separatorChar, '/')));
                    jar.write(Files.readAllBytes(f));
                    jar.closeEntry();
                }
            }
            return bytes.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } finally {
            deleteTree(dir);
        }
    }

    /** A jar with one entry per name, each holding a few bytes. */
    static byte[] withEntries(String... names) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (JarOutputStream jar = new JarOutputStream(bytes)) {
            for (String name : names) {
                jar.putNextEntry(new JarEntry(name));
                jar.write(new byte[] {1, 2, 3});
                jar.closeEntry();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    static void deleteTree(Path dir) {
        if (dir == null || !Files.exists(dir)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}

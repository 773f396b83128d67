package icebox.proxy;

import java.lang.reflect.Field;
import java.util.Map;

/**
 * Sets environment variables of this process as seen by {@link System#getenv}.
 *
 * <p>Java has no API for this. Like OpenWhisk's Java runtime, this reaches through the
 * unmodifiable view that {@code System.getenv()} returns to the map behind it (on Linux a
 * {@code ProcessEnvironment.StringEnvironment}, which accepts writes and is also what
 * {@code System.getenv(name)} and child processes read). The JVM must be started with
 * {@code --add-opens java.base/java.util=ALL-UNNAMED}; runtime.json does that.
 *
 * <p>The environment is process-wide: with ICEBOX_CONCURRENCY above 1, concurrent activations
 * see whichever activation wrote last, exactly as in OpenWhisk's runtimes.
 */
final class Environment {
    private static Map<String, String> writable;

    private Environment() {}

    /** Sets {@code name} to {@code value}, or removes it when {@code value} is null. */
    static synchronized void set(String name, String value) {
        Map<String, String> env = writable();
        if (value == null) {
            env.remove(name);
        } else {
            env.put(name, value);
        }
    }

    @SuppressWarnings("unchecked")
    private static Map<String, String> writable() {
        if (writable == null) {
            Map<String, String> view = System.getenv();
            try {
                Field inner = Class.forName("java.util.Collections$UnmodifiableMap")
                        .getDeclaredField("m");
                inner.setAccessible(true);
                writable = (Map<String, String>) inner.get(view);
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw new IllegalStateException("cannot set environment variables (start the JVM"
                        + " with --add-opens java.base/java.util=ALL-UNNAMED): " + e, e);
            }
        }
        return writable;
    }
}

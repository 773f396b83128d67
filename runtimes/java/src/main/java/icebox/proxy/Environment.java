package icebox.proxy;

import java.lang.reflect.Field;
import java.util.Map;

/**
 * Sets environment variables of this process as seen by {@link System#getenv}.
 *
 * <p>Java has no API for this. Like OpenWhisk's Java runtime, this reaches through the
 * unmodifiable view that {@code System.getenv()} returns to the map behind it (on Linux a
 * {@code ProcessEnvironment.StringEnvironment} over the JDK's copy of the environment, which
 * accepts writes and is also what {@code System.getenv(name)} reads and what
 * {@code ProcessBuilder.environment()} copies for a child). The C environment the JVM started
 * with is not changed (Java 17 cannot call setenv without JNI or an incubator module): native
 * code calling getenv(3), and a child started without {@code ProcessBuilder.environment()}
 * having been called ({@code Runtime.exec} with no envp included), still see the values from
 * the start. The JVM must be started with
 * {@code --add-opens java.base/java.util=ALL-UNNAMED}; runtime.json does that.
 *
 * <p>The environment is process-wide: in the process mode with ICEBOX_CONCURRENCY above 1,
 * concurrent activations see whichever activation wrote last, exactly as in OpenWhisk's
 * runtimes. The shared mode instead puts {@link ActivationEnvironment} behind the view, so
 * each activation's thread sees its own {@code __OW_*} values.
 */
final class Environment {
    private static final Object LOCK = new Object();
    private static Map<String, String> writable;
    private static ActivationEnvironment perThread;

    private Environment() {}

    /** Sets {@code name} to {@code value} process-wide; a null {@code value} removes it. */
    static void set(String name, String value) {
        synchronized (LOCK) {
            Map<String, String> env = writable();
            if (value == null) {
                env.remove(name);
            } else {
                env.put(name, value);
            }
        }
    }

    /**
     * From now on {@code System.getenv} answers the names of {@link #setForThisThread} with the
     * calling thread's values. Child processes still inherit the process-wide environment.
     *
     * @throws IllegalStateException when the JVM does not allow it (missing --add-opens)
     */
    static void usePerThreadActivationValues() {
        synchronized (LOCK) {
            if (perThread != null) {
                return;
            }
            Map<String, String> base = writable();
            ActivationEnvironment overlay = new ActivationEnvironment(base);
            try {
                Field inner = innerMapField();
                // A final instance field: writable through reflection once accessible. The
                // view's cached keySet/entrySet/values wrap the old map; none exist yet this
                // early, and clearing them keeps it so if the JDK ever made one.
                inner.set(System.getenv(), overlay);
                for (String cache : new String[] {"keySet", "entrySet", "values"}) {
                    Field f = inner.getDeclaringClass().getDeclaredField(cache);
                    f.setAccessible(true);
                    f.set(System.getenv(), null);
                }
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw new IllegalStateException("cannot give activations their own environment"
                        + " (start the JVM with --add-opens java.base/java.util=ALL-UNNAMED): "
                        + e, e);
            }
            perThread = overlay;
        }
    }

    /**
     * The calling thread's own values (null: unset) until {@link #clearForThisThread}; only
     * after {@link #usePerThreadActivationValues}.
     */
    static void setForThisThread(Map<String, String> values) {
        perThread.setForThisThread(values);
    }

    static void clearForThisThread() {
        perThread.clearForThisThread();
    }

    // The cast cannot be checked (Field.get returns Object), but the field is the map behind
    // System.getenv(), which the JDK declares Map<String, String>.
    @SuppressWarnings("unchecked")
    private static Map<String, String> writable() {
        if (writable == null) {
            try {
                writable = (Map<String, String>) innerMapField().get(System.getenv());
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw new IllegalStateException("cannot set environment variables (start the JVM"
                        + " with --add-opens java.base/java.util=ALL-UNNAMED): " + e, e);
            }
        }
        return writable;
    }

    private static Field innerMapField() throws ReflectiveOperationException {
        Field inner = Class.forName("java.util.Collections$UnmodifiableMap").getDeclaredField("m");
        inner.setAccessible(true);
        return inner;
    }
}

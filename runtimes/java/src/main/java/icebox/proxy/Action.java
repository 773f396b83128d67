package icebox.proxy;

import com.google.gson.JsonObject;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

/** A loaded action: the user's {@code public static JsonObject main(JsonObject)}. */
final class Action {
    private final Method entry;
    private final ClassLoader loader;

    Action(Method entry, ClassLoader loader) {
        this.entry = entry;
        this.loader = loader;
    }

    /**
     * Calls the entry point on the current thread with the action's class loader as context
     * class loader (libraries inside the jar look resources up through it).
     *
     * @return whatever the user code returned, possibly null or not a JsonObject
     * @throws Throwable what the user code threw, unwrapped
     */
    Object invoke(JsonObject args) throws Throwable {
        Thread thread = Thread.currentThread();
        ClassLoader previous = thread.getContextClassLoader();
        thread.setContextClassLoader(loader);
        try {
            return entry.invoke(null, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        } finally {
            thread.setContextClassLoader(previous);
        }
    }
}

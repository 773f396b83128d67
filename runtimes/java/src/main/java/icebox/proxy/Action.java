package icebox.proxy;

import com.google.gson.JsonObject;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.file.Path;

/**
 * A loaded action: the user's {@code public static JsonObject main(JsonObject)} in the action
 * classes of one class loader.
 */
final class Action implements Invocable {
    private final Method entry;
    private final ClassLoader loader;
    private final Path jar;
    private final String className;
    private final String methodName;

    Action(Method entry, ClassLoader loader, Path jar, String className, String methodName) {
        this.entry = entry;
        this.loader = loader;
        this.jar = jar;
        this.className = className;
        this.methodName = methodName;
    }

    /**
     * The same action in a class loader of its own: its own copies of the action's classes,
     * static fields and static initialisers (the shared mode's per-slot context).
     */
    Action loadAgain() throws InitException {
        return ActionLoader.instantiate(jar, className, methodName);
    }

    /**
     * Calls the entry point on the current thread with the action's class loader as context
     * class loader (libraries inside the jar look resources up through it).
     *
     * @return whatever the user code returned, possibly null or not a JsonObject
     * @throws Throwable what the user code threw, unwrapped
     */
    @Override
    public Object invoke(JsonObject args) throws Throwable {
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

package icebox.proxy;

import com.google.gson.JsonObject;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Path;

/**
 * A loaded action: the user's {@code public static JsonObject main(JsonObject)} in the action
 * classes of one class loader, and its optional {@code public static void iceboxRestored()}.
 */
final class Action implements Invocable {
    static final String HOOK = "iceboxRestored";

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
        return call(entry, args);
    }

    /** Calls the main class's {@code iceboxRestored()}, as {@link #invoke} calls the entry. */
    @Override
    public boolean restored() throws Throwable {
        Method hook = hook();
        if (hook == null) {
            return false;
        }
        call(hook);
        return true;
    }

    /**
     * The main class's public no-argument {@code iceboxRestored}, null without one. Looked up
     * when called rather than at /init: only a restore needs it, so it cannot fail /init.
     */
    private Method hook() throws InitException {
        Method hook;
        try {
            hook = Class.forName(className, false, loader).getMethod(HOOK);
        } catch (NoSuchMethodException | ClassNotFoundException e) {
            return null;
        }
        if (!Modifier.isStatic(hook.getModifiers())) {
            throw new InitException("Method '" + className + "#" + HOOK + "' must be static.");
        }
        // The declaring class need not be public; the method itself is.
        hook.setAccessible(true);
        return hook;
    }

    private Object call(Method method, Object... args) throws Throwable {
        Thread thread = Thread.currentThread();
        ClassLoader previous = thread.getContextClassLoader();
        thread.setContextClassLoader(loader);
        try {
            return method.invoke(null, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        } finally {
            thread.setContextClassLoader(previous);
        }
    }
}

package icebox.proxy;

import java.lang.management.ManagementFactory;
import java.lang.reflect.Method;

/**
 * Gives glibc malloc's free memory back to the OS: the diagnostic command
 * {@code System.trim_native_heap} (malloc_trim(0)), run in process.
 *
 * <p>The public way to run a diagnostic command in process is the DiagnosticCommand MBean of
 * {@code ManagementFactory.getPlatformMBeanServer()}, but creating the platform MBean server
 * registers every platform MBean: about 130 ms and 5 MiB of USS that never go away, in a call
 * whose purpose is to shrink the process. So this calls the MBean's implementation directly
 * (its private native {@code executeDiagnosticCommand}, the same entry point the MBean's
 * {@code invoke} ends in), which costs well under a millisecond and nothing lasting. That
 * needs {@code --add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED}
 * (runtime.json has it); without it, or on a JVM without the command, the trim is skipped and
 * {@link #trim} says why. Java 17 has no other way to reach malloc_trim: the foreign-function
 * API is an incubator module there, and enabling it prints a warning on every start.
 */
final class NativeHeap {
    private static final String COMMAND = "System.trim_native_heap";

    private static Object diagnosticCommands;
    private static Method execute;
    private static String unavailable;

    private NativeHeap() {}

    /**
     * Trims the C heap; returns the JVM's one-line report (RSS before and after), or throws
     * {@link IllegalStateException} saying why the trim could not run.
     */
    static synchronized String trim() {
        bind();
        if (unavailable != null) {
            throw new IllegalStateException(unavailable);
        }
        try {
            return ((String) execute.invoke(diagnosticCommands, COMMAND)).trim();
        } catch (ReflectiveOperationException e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            throw new IllegalStateException(COMMAND + " failed: " + Throwables.describe(cause),
                    cause);
        }
    }

    private static void bind() {
        if (execute != null || unavailable != null) {
            return;
        }
        try {
            // The native methods live in libmanagement_ext, which the jdk.management platform
            // provider loads; asking it for any of its beans makes sure it has.
            ManagementFactory.getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class);
            Class<?> impl = Class.forName("com.sun.management.internal.DiagnosticCommandImpl");
            Method factory = impl.getDeclaredMethod("getDiagnosticCommandMBean");
            factory.setAccessible(true);
            Method exec = impl.getDeclaredMethod("executeDiagnosticCommand", String.class);
            exec.setAccessible(true);
            Object commands = factory.invoke(null);
            String[] names = listCommands(impl, commands);
            if (names != null && !java.util.Arrays.asList(names).contains(COMMAND)) {
                unavailable = "this JVM has no " + COMMAND + " diagnostic command";
                return;
            }
            diagnosticCommands = commands;
            execute = exec;
        } catch (ReflectiveOperationException | RuntimeException e) {
            // InaccessibleObjectException when the JVM was started without the --add-opens.
            unavailable = COMMAND + " is unavailable: " + Throwables.describe(e);
        }
    }

    /** The JVM's diagnostic command names, or null if they cannot be listed. */
    private static String[] listCommands(Class<?> impl, Object commands) {
        try {
            Method list = impl.getDeclaredMethod("getDiagnosticCommands");
            list.setAccessible(true);
            return (String[]) list.invoke(commands);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }
}

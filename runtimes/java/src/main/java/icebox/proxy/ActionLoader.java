package icebox.proxy;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Base64;
import java.util.Enumeration;
import java.util.Map;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/** Turns the {@code value} of an /init request into a loaded {@link Action}. */
final class ActionLoader {
    private static int attempt;

    private ActionLoader() {}

    /**
     * Decodes and checks the jar, applies {@code value.env}, loads the main class (running its
     * static initialisers) and resolves the entry method.
     *
     * @throws InitException with a message for the caller when any step fails
     */
    static Action load(JsonObject value) throws InitException {
        String[] entry = parseMain(stringField(value, "main", "main"));
        byte[] jar = decodeJar(value);
        Path file = writeJar(jar);
        boolean loaded = false;
        try {
            checkEntries(file);
            applyEnv(value.get("env"));
            Action action = instantiate(file, entry[0], entry[1]);
            loaded = true;
            return action;
        } catch (RuntimeException e) {
            throw new InitException("Loading the action failed: " + Throwables.describe(e));
        } finally {
            if (!loaded) {
                delete(file);
            }
        }
    }

    /**
     * A fresh class loader over the checked jar {@code file} that defines the action's classes
     * itself (its parent, the proxy's loader, has none of them), so the action's static fields
     * are its own; the proxy's classes, Gson and the JDK come from the parent and are shared.
     * Initialises the main class and resolves the entry method.
     */
    static Action instantiate(Path file, String className, String methodName)
            throws InitException {
        URLClassLoader loader = null;
        boolean loaded = false;
        try {
            loader = new URLClassLoader("action", new URL[] {file.toUri().toURL()},
                    ActionLoader.class.getClassLoader());
            Action action = new Action(resolve(loader, className, methodName), loader, file,
                    className, methodName);
            loaded = true;
            return action;
        } catch (IOException | RuntimeException e) {
            throw new InitException("Loading the action failed: " + Throwables.describe(e));
        } finally {
            if (!loaded) {
                close(loader);
            }
        }
    }

    /** {@code Class} or {@code Class#method}; the method defaults to {@code main}. */
    static String[] parseMain(String main) throws InitException {
        int hash = main.indexOf('#');
        String className = hash < 0 ? main : main.substring(0, hash);
        String method = hash < 0 ? "main" : main.substring(hash + 1);
        if (className.isEmpty() || method.isEmpty() || method.indexOf('#') >= 0) {
            throw new InitException("Invalid main '" + main
                    + "': expected 'Class' or 'Class#method'.");
        }
        return new String[] {className, method};
    }

    /**
     * Whether a jar entry name could address a file outside the directory it is extracted to:
     * an absolute path, a drive letter or a {@code ..} segment.
     */
    static boolean isUnsafeEntryName(String name) {
        if (name.startsWith("/") || name.startsWith("\\")
                || name.length() > 1 && name.charAt(1) == ':') {
            return true;
        }
        int start = 0;
        for (int i = 0; i <= name.length(); i++) {
            if (i == name.length() || name.charAt(i) == '/' || name.charAt(i) == '\\') {
                if (i - start == 2 && name.charAt(start) == '.' && name.charAt(start + 1) == '.') {
                    return true;
                }
                start = i + 1;
            }
        }
        return false;
    }

    private static byte[] decodeJar(JsonObject value) throws InitException {
        JsonElement binary = value.get("binary");
        if (binary == null || !binary.isJsonPrimitive() || !binary.getAsJsonPrimitive().isBoolean()
                || !binary.getAsBoolean()) {
            throw new InitException("Java actions must be a jar: send binary: true with the"
                    + " base64 of the jar as code.");
        }
        String code = stringField(value, "code", "");
        if (code.isEmpty()) {
            throw new InitException("The action has no code.");
        }
        try {
            // The MIME decoder accepts the line breaks that `base64` and many encoders insert.
            return Base64.getMimeDecoder().decode(code);
        } catch (IllegalArgumentException e) {
            throw new InitException("The action code is not valid base64: " + e.getMessage());
        }
    }

    private static Path writeJar(byte[] jar) throws InitException {
        // A predictable name avoids Files.createTempFile, whose SecureRandom costs start-up
        // time. CREATE_NEW never follows or reuses an existing file; one left by an earlier
        // process with the same pid (when /tmp is shared) just moves us to the next name.
        Path dir = Path.of(System.getProperty("java.io.tmpdir"));
        long pid = ProcessHandle.current().pid();
        for (int tries = 0; ; tries++) {
            Path file = dir.resolve("icebox-action-" + pid + "-" + (++attempt) + ".jar");
            try {
                Files.write(file, jar, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
                return file;
            } catch (FileAlreadyExistsException taken) {
                if (tries == 100) {
                    throw new InitException("Cannot store the action jar in " + dir
                            + ": too many stale files named icebox-action-" + pid + "-*.jar");
                }
            } catch (IOException e) {
                throw new InitException("Cannot store the action jar in " + dir + ": "
                        + Throwables.describe(e));
            }
        }
    }

    private static void checkEntries(Path file) throws InitException {
        try (ZipFile zip = new ZipFile(file.toFile())) {
            Enumeration<? extends ZipEntry> entries = zip.entries();
            while (entries.hasMoreElements()) {
                String name = entries.nextElement().getName();
                if (isUnsafeEntryName(name)) {
                    throw new InitException("The action jar has an unsafe entry name '" + name
                            + "' (absolute path or '..').");
                }
            }
        } catch (IOException e) {
            throw new InitException("The action code is not a valid jar: " + Throwables.describe(e));
        }
    }

    private static void applyEnv(JsonElement env) throws InitException {
        if (env == null || env.isJsonNull()) {
            return;
        }
        if (!env.isJsonObject()) {
            throw new InitException("value.env must be a JSON object.");
        }
        for (Map.Entry<String, JsonElement> e : env.getAsJsonObject().entrySet()) {
            JsonElement v = e.getValue();
            try {
                Environment.set(e.getKey(), v.isJsonNull() ? null : Json.text(v));
            } catch (IllegalArgumentException bad) {
                throw new InitException("Invalid environment variable '" + e.getKey() + "': "
                        + bad.getMessage());
            } catch (IllegalStateException noAccess) {
                throw new InitException(noAccess.getMessage());
            }
        }
    }

    private static Method resolve(ClassLoader loader, String className, String methodName)
            throws InitException {
        Thread thread = Thread.currentThread();
        ClassLoader previous = thread.getContextClassLoader();
        thread.setContextClassLoader(loader);
        Class<?> cls;
        try {
            cls = Class.forName(className, true, loader);
        } catch (ClassNotFoundException e) {
            throw new InitException("Class '" + className + "' was not found in the action jar.");
        } catch (ExceptionInInitializerError e) {
            throw new InitException("Initialising class '" + className + "' failed: "
                    + Throwables.describe(e.getCause() != null ? e.getCause() : e));
        } catch (LinkageError e) {
            throw new InitException("Loading class '" + className + "' failed: " + Throwables.describe(e));
        } finally {
            thread.setContextClassLoader(previous);
        }
        Method method;
        try {
            method = cls.getMethod(methodName, JsonObject.class);
        } catch (NoSuchMethodException e) {
            throw new InitException("Class '" + className + "' has no public method '"
                    + methodName + "(com.google.gson.JsonObject)'.");
        } catch (LinkageError e) {
            throw new InitException("Loading class '" + className + "' failed: " + Throwables.describe(e));
        }
        if (!Modifier.isStatic(method.getModifiers())) {
            throw new InitException("Method '" + className + "#" + methodName
                    + "' must be static.");
        }
        // The declaring class need not be public; the method itself is.
        method.setAccessible(true);
        return method;
    }

    private static String stringField(JsonObject value, String name, String fallback)
            throws InitException {
        JsonElement e = value.get(name);
        if (e == null || e.isJsonNull()) {
            return fallback;
        }
        if (!e.isJsonPrimitive() || !e.getAsJsonPrimitive().isString()) {
            throw new InitException("value." + name + " must be a string.");
        }
        return e.getAsString();
    }

    private static void delete(Path file) {
        try {
            Files.deleteIfExists(file);
        } catch (IOException ignored) {
            // /tmp is a per-instance tmpfs that disappears with the instance.
        }
    }

    private static void close(URLClassLoader loader) {
        try {
            if (loader != null) {
                loader.close();
            }
        } catch (IOException ignored) {
            // Only the jar's file handle; the instance's /tmp goes away with it.
        }
    }
}

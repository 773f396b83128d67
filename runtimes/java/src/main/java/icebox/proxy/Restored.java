package icebox.proxy;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonPrimitive;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * POST /icebox/restored, iceboxd's first call on an instance restored from a snapshot taken
 * after /init: sets the environment variables whose value differs for the new instance
 * ({@code env}, e.g. {@code __OW_API_HOST}), reseeds the JDK's reachable random state from the
 * daemon's seed ({@link JdkGenerators}), then calls the action's {@code iceboxRestored()} hook
 * in every loaded copy of the action.
 */
final class Restored {
    /** Overlapping calls must not interleave reseeding and hooks. */
    private static final Object LOCK = new Object();

    private Restored() {}

    /** @param action the loaded action, null before a successful /init */
    static Response handle(byte[] body, Invocable action) {
        if (action == null) {
            return Response.error(403, "Cannot restore an uninitialized action:"
                    + " /icebox/restored needs a successful /init first.");
        }
        byte[] seed;
        Map<String, String> env;
        try {
            JsonElement document = Json.parse(body);
            // Both checked before anything changes: a bad body applies nothing.
            seed = seedOf(document);
            env = envOf(document.getAsJsonObject());
        } catch (JsonParseException | IllegalArgumentException e) {
            return Response.error(400, e.getMessage());
        }
        synchronized (LOCK) {
            // The environment first, so the hooks already see the new instance's values.
            List<String> applied;
            try {
                applied = applyEnv(env);
            } catch (IllegalStateException noAccess) {
                // The JVM was started without --add-opens java.base/java.util: nothing was set
                // (the first write is what fails), and nothing else is done either.
                return Response.error(500, noAccess.getMessage());
            }
            List<String> reseeded = JdkGenerators.reseed(seed);
            boolean hook;
            try {
                hook = action.restored();
            } catch (InitException e) {
                return Response.error(502, e.getMessage());
            } catch (Throwable t) {
                // To stderr, which becomes part of the first activation's log.
                t.printStackTrace();
                return Response.error(502, Throwables.describe(t));
            }
            JsonObject ok = new JsonObject();
            ok.addProperty("ok", true);
            JsonArray names = new JsonArray();
            reseeded.forEach(names::add);
            ok.add("reseeded", names);
            ok.addProperty("hook", hook);
            JsonArray envNames = new JsonArray();
            applied.forEach(envNames::add);
            ok.add("env", envNames);
            return Response.json(200, Json.serialize(ok));
        }
    }

    /**
     * The body's optional {@code env}: name to value, in the body's order; empty when absent.
     *
     * @throws IllegalArgumentException naming the variable, for anything that is not an object
     *     of environment variable names to strings the OS environment can hold
     */
    static Map<String, String> envOf(JsonObject body) {
        Map<String, String> env = new LinkedHashMap<>();
        if (!body.has("env")) {
            return env;
        }
        JsonElement value = body.get("env");
        if (!value.isJsonObject()) {
            throw new IllegalArgumentException("The /icebox/restored \"env\" must be an object"
                    + " of environment variable names to string values, got " + jsonType(value)
                    + ".");
        }
        for (Map.Entry<String, JsonElement> e : value.getAsJsonObject().entrySet()) {
            String name = e.getKey();
            // What the JDK's environment map (and execve for child processes) would refuse
            // half-way through, checked before anything is set.
            if (name.isEmpty() || name.indexOf('=') >= 0 || name.indexOf(0) >= 0) {
                // Quoted as JSON, so that an empty name or a NUL shows.
                String quoted = new String(Json.serialize(new JsonPrimitive(name)),
                        StandardCharsets.UTF_8);
                throw new IllegalArgumentException("The /icebox/restored \"env\" has an invalid"
                        + " variable name " + quoted + " (empty, or with '=' or a NUL).");
            }
            String text = string(e.getValue());
            if (text == null) {
                throw new IllegalArgumentException("The /icebox/restored \"env\" value of " + name
                        + " must be a string, got " + jsonType(e.getValue()) + ".");
            }
            if (text.indexOf(0) >= 0) {
                throw new IllegalArgumentException("The /icebox/restored \"env\" value of " + name
                        + " contains a NUL character.");
            }
            env.put(name, text);
        }
        return env;
    }

    /**
     * Sets the variables process-wide through {@link Environment#set}, i.e. in the JDK's map
     * behind {@code System.getenv()}: what {@code System.getenv(name)}, {@code System.getenv()}
     * and child processes read, and, in the shared mode, what every slot's per-thread view
     * falls back to for the names an activation does not hold itself.
     *
     * @return the names set, sorted, for the reply
     */
    private static List<String> applyEnv(Map<String, String> env) {
        for (Map.Entry<String, String> e : env.entrySet()) {
            Environment.set(e.getKey(), e.getValue());
        }
        List<String> names = new ArrayList<>(env.keySet());
        names.sort(null);
        return names;
    }

    private static String jsonType(JsonElement value) {
        if (value == null || value.isJsonNull()) {
            return "null";
        }
        if (value.isJsonObject()) {
            return "an object";
        }
        if (value.isJsonArray()) {
            return "an array";
        }
        if (value.getAsJsonPrimitive().isBoolean()) {
            return "a boolean";
        }
        return value.getAsJsonPrimitive().isNumber() ? "a number" : "a string";
    }

    /** @throws IllegalArgumentException saying which field is wrong */
    static byte[] seedOf(JsonElement body) {
        if (!body.isJsonObject()) {
            throw new IllegalArgumentException("the request body must be a JSON object");
        }
        JsonObject object = body.getAsJsonObject();
        String instance = string(object.get("instance"));
        if (instance == null || instance.isEmpty()) {
            throw new IllegalArgumentException("The /icebox/restored body needs \"instance\":"
                    + " the new instance's id as a non-empty string.");
        }
        JsonElement seed = object.get("seed");
        String hex = string(seed);
        byte[] bytes = hex == null ? null : bytes(hex);
        if (bytes == null) {
            throw new IllegalArgumentException("The /icebox/restored \"seed\" must be 64 hex"
                    + " digits (32 bytes), got " + shown(seed) + ".");
        }
        return bytes;
    }

    /**
     * The 32 bytes of 64 hex digits, or null. By hand rather than with a regular expression:
     * this runs on the restore path, and java.util.regex may not be loaded yet.
     */
    private static byte[] bytes(String hex) {
        if (hex.length() != 64) {
            return null;
        }
        byte[] bytes = new byte[32];
        for (int i = 0; i < 64; i++) {
            int digit = Character.digit(hex.charAt(i), 16);
            if (digit < 0 || hex.charAt(i) > 'f') {
                return null;
            }
            bytes[i / 2] |= (byte) (i % 2 == 0 ? digit << 4 : digit);
        }
        return bytes;
    }

    private static String shown(JsonElement seed) {
        if (seed == null) {
            return "nothing";
        }
        String text = string(seed);
        if (text != null) {
            return text.length() <= 80 ? '"' + text + '"'
                    : "a string of " + text.length() + " characters";
        }
        if (seed.isJsonObject() || seed.isJsonArray()) {
            return seed.isJsonObject() ? "an object" : "an array";
        }
        return seed.toString();
    }

    private static String string(JsonElement e) {
        return e != null && e.isJsonPrimitive() && e.getAsJsonPrimitive().isString()
                ? e.getAsString() : null;
    }
}

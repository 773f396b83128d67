package icebox.proxy;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import java.util.List;

/**
 * POST /icebox/restored, iceboxd's first call on an instance restored from a snapshot taken
 * after /init: reseeds the JDK's reachable random state from the daemon's seed
 * ({@link JdkGenerators}), then calls the action's {@code iceboxRestored()} hook in every
 * loaded copy of the action.
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
        try {
            seed = seedOf(Json.parse(body));
        } catch (JsonParseException | IllegalArgumentException e) {
            return Response.error(400, e.getMessage());
        }
        synchronized (LOCK) {
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
            return Response.json(200, Json.serialize(ok));
        }
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

package icebox.proxy;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Semaphore;

/** The OpenWhisk action protocol plus the /icebox extensions, independent of the transport. */
final class Proxy {
    static final String SENTINEL = "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX";

    /** Cleared when absent from a /run body so no value leaks from the previous activation. */
    private static final String[] ACTIVATION_KEYS = {
        "namespace", "action_name", "activation_id", "transaction_id", "api_key", "deadline",
        "action_version",
    };

    private final Semaphore runSlots;
    private final Object initLock = new Object();
    private final Reclaimer reclaimer = new Reclaimer();
    private final boolean eagerGc;
    private volatile Action action;

    /**
     * @param eagerGc run a full collection after every /run, before answering (ICEBOX_EAGER_GC:
     *     Desiccant's "eager" baseline)
     */
    Proxy(int concurrency, boolean eagerGc) {
        this.runSlots = new Semaphore(concurrency, true);
        this.eagerGc = eagerGc;
    }

    Response handle(HttpRequest request) {
        String method = request.method();
        switch (request.path()) {
            case "/run":
                return method.equals("POST") ? run(request.body())
                        : Response.methodNotAllowed("POST");
            case "/init":
                return method.equals("POST") ? init(request.body())
                        : Response.methodNotAllowed("POST");
            case "/icebox/stats":
                if (!method.equals("GET")) {
                    return Response.methodNotAllowed("GET");
                }
                return stats(request.queryParameter("gc"));
            case "/icebox/reclaim":
                return method.equals("POST") ? reclaim(request.body())
                        : Response.methodNotAllowed("POST");
            default:
                return Response.error(404, "Not found: " + request.path());
        }
    }

    private Response stats(String gc) {
        JsonObject stats = HeapStats.collect("1".equals(gc) || "true".equals(gc));
        JsonObject details = stats.getAsJsonObject("details");
        details.addProperty("eager_gc", eagerGc);
        reclaimer.describe(details);
        return Response.json(200, Json.serialize(stats));
    }

    /** Body: absent, empty or {"variant": "<name>"} (absent or null: the default variant). */
    private Response reclaim(byte[] body) {
        String variant = Reclaimer.DEFAULT_VARIANT;
        if (!new String(body, StandardCharsets.UTF_8).isBlank()) {
            JsonElement requested;
            try {
                requested = object(Json.parse(body)).get("variant");
            } catch (JsonParseException e) {
                return Response.error(400, e.getMessage());
            }
            if (requested != null && !requested.isJsonNull()) {
                if (!requested.isJsonPrimitive() || !requested.getAsJsonPrimitive().isString()
                        || !Reclaimer.VARIANTS.contains(requested.getAsString())) {
                    JsonObject error = new JsonObject();
                    error.addProperty("error", "unknown reclaim variant " + requested
                            + "; the variants are " + String.join(", ", Reclaimer.VARIANTS));
                    JsonArray variants = new JsonArray();
                    Reclaimer.VARIANTS.forEach(variants::add);
                    error.add("variants", variants);
                    return Response.json(400, Json.serialize(error));
                }
                variant = requested.getAsString();
            }
        }
        return Response.json(200, Json.serialize(reclaimer.reclaim(variant)));
    }

    private Response init(byte[] body) {
        JsonObject value;
        try {
            value = valueOf(body, false);
        } catch (JsonParseException e) {
            return Response.error(400, e.getMessage());
        }
        reclaimer.workStarted();
        try {
            return load(value);
        } finally {
            reclaimer.workFinished();
        }
    }

    private Response load(JsonObject value) {
        synchronized (initLock) {
            if (action != null) {
                return Response.error(403,
                        "Internal error. Cannot initialize the action more than once.");
            }
            try {
                action = ActionLoader.load(value);
            } catch (InitException e) {
                return Response.error(502, e.getMessage());
            }
        }
        JsonObject ok = new JsonObject();
        ok.addProperty("ok", true);
        return Response.json(200, Json.serialize(ok));
    }

    private Response run(byte[] body) {
        Action loaded = action;
        if (loaded == null) {
            return Response.error(403, "Cannot invoke an uninitialized action.");
        }
        JsonObject request;
        JsonObject value;
        try {
            request = object(Json.parse(body));
            value = valueOf(request, true);
        } catch (JsonParseException e) {
            return Response.error(400, e.getMessage());
        }
        // Before waiting for a slot: a reclaim in progress stops at its next step.
        reclaimer.workStarted();
        runSlots.acquireUninterruptibly();
        try {
            setActivationEnv(request);
            return result(loaded.invoke(value));
        } catch (Throwable t) {
            // Logged like OpenWhisk's runtime does, so the trace lands in the activation's logs.
            t.printStackTrace();
            return Response.error(502, Throwables.describe(t));
        } finally {
            runSlots.release();
            try {
                if (eagerGc) {
                    // After the result is built and before the response: the latency iceboxd
                    // measures includes it, as in Desiccant's eager baseline.
                    System.gc();
                }
            } finally {
                reclaimer.workFinished();
                endActivationLogs();
            }
        }
    }

    private static Response result(Object result) {
        if (!(result instanceof JsonObject)) {
            return Response.error(502, "The action did not return a dictionary.");
        }
        JsonObject object = (JsonObject) result;
        byte[] body;
        try {
            body = Json.serialize(object);
        } catch (IllegalArgumentException e) {
            return Response.error(502, "The action result is not valid JSON: " + e.getMessage());
        }
        // OpenWhisk passes an {"error": ...} result through as an application error.
        return Response.json(object.has("error") ? 502 : 200, body);
    }

    /** {@code __OW_<KEY>} for every top-level key of the /run body except {@code value}. */
    private static void setActivationEnv(JsonObject request) {
        for (String key : ACTIVATION_KEYS) {
            if (!request.has(key)) {
                Environment.set(envName(key), null);
            }
        }
        for (Map.Entry<String, JsonElement> e : request.entrySet()) {
            if (e.getKey().equals("value")) {
                continue;
            }
            JsonElement v = e.getValue();
            String text = v.isJsonNull() ? null : Json.text(v);
            try {
                Environment.set(envName(e.getKey()), text);
            } catch (IllegalArgumentException unrepresentable) {
                // A name with '=' or a NUL cannot be an environment variable; skip it.
            }
        }
    }

    private static String envName(String key) {
        return "__OW_" + key.toUpperCase(Locale.ROOT);
    }

    private static void endActivationLogs() {
        System.out.println(SENTINEL);
        System.out.flush();
        System.err.println(SENTINEL);
        System.err.flush();
    }

    private static JsonObject valueOf(byte[] body, boolean optional) {
        return valueOf(object(Json.parse(body)), optional);
    }

    private static JsonObject valueOf(JsonObject request, boolean optional) {
        JsonElement value = request.get("value");
        if (optional && (value == null || value.isJsonNull())) {
            return new JsonObject();
        }
        if (value == null || !value.isJsonObject()) {
            throw new JsonParseException("the request body needs a \"value\" object");
        }
        return value.getAsJsonObject();
    }

    private static JsonObject object(JsonElement body) {
        if (!body.isJsonObject()) {
            throw new JsonParseException("the request body must be a JSON object");
        }
        return body.getAsJsonObject();
    }
}

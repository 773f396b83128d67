package icebox.proxy;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;

/** The OpenWhisk action protocol plus the /icebox extensions, independent of the transport. */
final class Proxy {
    static final String SENTINEL = "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX";

    /** Cleared when absent from a /run body so no value leaks from the previous activation. */
    private static final String[] ACTIVATION_KEYS = {
        "namespace", "action_name", "activation_id", "transaction_id", "api_key", "deadline",
        "action_version",
    };

    private final Semaphore runSlots;
    private final int concurrency;
    private final SharingMode sharing;
    private final AtomicInteger inFlight = new AtomicInteger();
    private final Object initLock = new Object();
    private final Reclaimer reclaimer = new Reclaimer();
    private final boolean eagerGc;
    private volatile Invocable action;

    /**
     * @param eagerGc run a full collection after every /run, before answering (ICEBOX_EAGER_GC:
     *     Desiccant's "eager" baseline)
     * @param sharing how concurrent activations share this JVM (ICEBOX_SHARING); in the shared
     *     mode {@link Environment#usePerThreadActivationValues} must have been called
     */
    Proxy(int concurrency, boolean eagerGc, SharingMode sharing) {
        this.runSlots = new Semaphore(concurrency, true);
        this.concurrency = concurrency;
        this.sharing = sharing;
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
            case "/icebox/restored":
                return method.equals("POST") ? Restored.handle(request.body(), action)
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
        stats.add("sharing", sharingStats());
        return Response.json(200, Json.serialize(stats));
    }

    /** The protocol's {@code sharing} object: mode, capacity, in_flight, contexts (shared). */
    private JsonObject sharingStats() {
        JsonObject object = new JsonObject();
        object.addProperty("mode", sharing.label);
        object.addProperty("capacity", concurrency);
        object.addProperty("in_flight", inFlight.get());
        if (sharing == SharingMode.SHARED) {
            Invocable loaded = action;
            JsonObject contexts;
            if (loaded instanceof ClassLoaderSlots) {
                contexts = ((ClassLoaderSlots) loaded).describe();
            } else {
                contexts = new JsonObject();
                contexts.addProperty("live", 0);
                contexts.addProperty("busy", 0);
                contexts.addProperty("created", 0);
            }
            object.add("contexts", contexts);
        }
        return object;
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
                Action loaded = ActionLoader.load(value);
                action = sharing == SharingMode.SHARED
                        ? new ClassLoaderSlots(loaded, concurrency) : loaded;
            } catch (InitException e) {
                return Response.error(502, e.getMessage());
            }
        }
        JsonObject ok = new JsonObject();
        ok.addProperty("ok", true);
        return Response.json(200, Json.serialize(ok));
    }

    private Response run(byte[] body) {
        Invocable loaded = action;
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
        inFlight.incrementAndGet();
        try {
            setActivationEnv(request);
            return result(loaded.invoke(value));
        } catch (InitException e) {
            // The shared mode could not load the action into a new slot.
            System.err.println(e.getMessage());
            return Response.error(502, e.getMessage());
        } catch (Throwable t) {
            // Logged like OpenWhisk's runtime does, so the trace lands in the activation's logs.
            t.printStackTrace();
            return Response.error(502, Throwables.describe(t));
        } finally {
            if (sharing == SharingMode.SHARED) {
                Environment.clearForThisThread();
            }
            inFlight.decrementAndGet();
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

    /**
     * {@code __OW_<KEY>} for every top-level key of the /run body except {@code value}:
     * process-wide in the process mode, for this thread only in the shared mode.
     */
    private void setActivationEnv(JsonObject request) {
        Map<String, String> values = new HashMap<>();
        for (String key : ACTIVATION_KEYS) {
            values.put(envName(key), null);
        }
        for (Map.Entry<String, JsonElement> e : request.entrySet()) {
            String name = envName(e.getKey());
            if (e.getKey().equals("value") || name.indexOf('=') >= 0 || name.indexOf(0) >= 0) {
                // A name with '=' or a NUL cannot be an environment variable; skip it.
                continue;
            }
            JsonElement v = e.getValue();
            String text = v.isJsonNull() ? null : Json.text(v);
            // A NUL cannot be in an environment value either: the variable is left unset.
            values.put(name, text == null || text.indexOf(0) >= 0 ? null : text);
        }
        if (sharing == SharingMode.SHARED) {
            Environment.setForThisThread(values);
            return;
        }
        for (Map.Entry<String, String> e : values.entrySet()) {
            try {
                Environment.set(e.getKey(), e.getValue());
            } catch (IllegalArgumentException unrepresentable) {
                // A value with a NUL cannot be an environment variable; skip it.
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

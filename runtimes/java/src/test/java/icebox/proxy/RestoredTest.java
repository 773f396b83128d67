package icebox.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import icebox.proxy.ProxyProcess.Reply;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** POST /icebox/restored: reseeding the JDK's reachable random state and the action's hook. */
class RestoredTest {
    private static final String SEED_A = "a1".repeat(32);
    private static final String SEED_B = "b2".repeat(32);
    private static final String SENTINEL = "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX";

    private final List<ProxyProcess> proxies = new ArrayList<>();
    private ExecutorService clients;

    @AfterEach
    void stop() {
        if (clients != null) {
            clients.shutdownNow();
        }
        proxies.forEach(ProxyProcess::close);
    }

    private ProxyProcess started(Map<String, String> env, String main) {
        ProxyProcess proxy = ProxyProcess.start(env);
        proxies.add(proxy);
        Reply init = proxy.init(main, RestoredActions.jar());
        assertEquals(200, init.status(), init.body());
        return proxy;
    }

    private ProxyProcess started() {
        return started(Map.of(), "restored.Action");
    }

    private static Reply restored(ProxyProcess proxy, String seed) {
        return proxy.request("POST", "/icebox/restored",
                "{\"instance\": \"inst-1\", \"seed\": \"" + seed + "\"}");
    }

    private static JsonObject run(ProxyProcess proxy) {
        Reply reply = proxy.run(new JsonObject());
        assertEquals(200, reply.status(), reply.body());
        return reply.json();
    }

    @Test
    void theSameSeedGivesTheSameStateAnotherSeedAnother() {
        ProxyProcess first = started();
        ProxyProcess second = started();
        ProxyProcess third = started();
        for (ProxyProcess proxy : List.of(first, second)) {
            Reply reply = restored(proxy, SEED_A);
            assertEquals(200, reply.status(), reply.body());
            assertEquals("{\"ok\":true,\"reseeded\":[\"new Random()\",\"new SplittableRandom()\","
                    + "\"Collections.shuffle\"],\"hook\":true,\"env\":[]}", reply.body());
        }
        assertEquals(200, restored(third, SEED_B).status());
        JsonObject a = run(first);
        JsonObject b = run(second);
        JsonObject c = run(third);
        for (String key : List.of("splittable", "shuffled", "uniquifier")) {
            assertEquals(a.get(key), b.get(key), key);
            assertNotEquals(a.get(key), c.get(key), key);
        }
    }

    @Test
    void aSecondCallRestartsTheStateAndRunsTheHookAgain() {
        ProxyProcess proxy = started();
        assertEquals(0, run(proxy).get("restored").getAsInt());
        assertEquals(200, restored(proxy, SEED_A).status());
        JsonObject once = run(proxy);
        assertEquals(1, once.get("restored").getAsInt());
        assertNotEquals(once.get("shuffled"), run(proxy).get("shuffled"));
        assertEquals(200, restored(proxy, SEED_A).status());
        JsonObject twice = run(proxy);
        assertEquals(2, twice.get("restored").getAsInt());
        assertEquals(once.get("splittable"), twice.get("splittable"));
        assertEquals(once.get("shuffled"), twice.get("shuffled"));
    }

    @Test
    void theHookWritesToTheNextActivationsLogAndNoSentinel() {
        ProxyProcess proxy = started();
        assertEquals(200, restored(proxy, SEED_A).status());
        assertFalse(proxy.stdout().contains(SENTINEL), proxy.stdout());
        run(proxy);
        assertEquals("hook ran\n" + SENTINEL + "\n", proxy.stdout());
    }

    @Test
    void aThrowingHookIs502AndTheProxyServesOn() {
        ProxyProcess proxy = started();
        JsonObject value = new JsonObject();
        value.addProperty("hook", "throw");
        assertEquals(200, proxy.run(value).status());
        Reply reply = restored(proxy, SEED_A);
        assertEquals(502, reply.status());
        assertEquals("java.lang.IllegalStateException: cannot reconnect", reply.error());
        assertTrue(proxy.stderr().contains("java.lang.IllegalStateException: cannot reconnect"));
        assertEquals(0, run(proxy).get("restored").getAsInt());
    }

    @Test
    void aHookThatIsNotStaticIs502() {
        ProxyProcess proxy = started(Map.of(), "restored.Instance");
        Reply reply = restored(proxy, SEED_A);
        assertEquals(502, reply.status());
        assertEquals("Method 'restored.Instance#iceboxRestored' must be static.", reply.error());
    }

    @Test
    void anActionWithoutTheHookIsReseededAllTheSame() {
        ProxyProcess plain = ProxyProcess.start();
        proxies.add(plain);
        assertEquals(200, plain.init("demo.Action", TestActions.jar()).status());
        Reply reply = restored(plain, SEED_A);
        assertEquals(200, reply.status(), reply.body());
        assertFalse(reply.json().get("hook").getAsBoolean());
        assertTrue(reply.json().getAsJsonArray("reseeded").size() >= 2, reply.body());
    }

    @Test
    void beforeInitIs403() {
        ProxyProcess proxy = ProxyProcess.start();
        proxies.add(proxy);
        Reply reply = restored(proxy, SEED_A);
        assertEquals(403, reply.status());
        assertEquals("Cannot restore an uninitialized action: /icebox/restored needs a"
                + " successful /init first.", reply.error());
    }

    @Test
    void aMalformedBodyIs400AndTheProxyServesOn() {
        ProxyProcess proxy = started();
        String[][] cases = {
            {"{not json", "malformed JSON"},
            {"[]", "must be a JSON object"},
            {"{\"seed\": \"" + SEED_A + "\"}", "\"instance\""},
            {"{\"instance\": \"\", \"seed\": \"" + SEED_A + "\"}", "\"instance\""},
            {"{\"instance\": \"i\"}", "must be 64 hex digits (32 bytes), got nothing."},
            {"{\"instance\": \"i\", \"seed\": \"abcd\"}", "got \"abcd\"."},
            {"{\"instance\": \"i\", \"seed\": \"" + "zz".repeat(32) + "\"}", "64 hex digits"},
            {"{\"instance\": \"i\", \"seed\": 12}", "got 12."},
        };
        for (String[] c : cases) {
            Reply reply = proxy.request("POST", "/icebox/restored", c[0]);
            assertEquals(400, reply.status(), c[0]);
            assertTrue(reply.error().contains(c[1]), reply.error());
        }
        assertEquals(405, proxy.request("GET", "/icebox/restored", null).status());
        assertEquals(0, run(proxy).get("restored").getAsInt());
        assertEquals(200, restored(proxy, SEED_A).status());
    }

    private List<JsonObject> overlapping(ProxyProcess proxy, String latch, int parties)
            throws Exception {
        JsonObject value = new JsonObject();
        value.addProperty("latch", latch);
        value.addProperty("parties", parties);
        clients = Executors.newFixedThreadPool(parties);
        List<Future<Reply>> runs = new ArrayList<>();
        for (int i = 0; i < parties; i++) {
            runs.add(clients.submit(() -> proxy.run(value)));
        }
        List<JsonObject> bodies = new ArrayList<>();
        for (Future<Reply> run : runs) {
            Reply reply = run.get(60, TimeUnit.SECONDS);
            assertEquals(200, reply.status(), reply.body());
            bodies.add(reply.json());
        }
        clients.shutdown();
        return bodies;
    }

    private static List<Integer> restoredCounts(List<JsonObject> bodies) {
        List<Integer> counts = new ArrayList<>();
        bodies.forEach(body -> counts.add(body.get("restored").getAsInt()));
        counts.sort(Comparator.naturalOrder());
        return counts;
    }

    @Test
    void sharedModeRunsTheHookInEverySlotLoadedBeforeTheCall() throws Exception {
        Map<String, String> shared = Map.of("ICEBOX_SHARING", "shared", "ICEBOX_CONCURRENCY", "3");
        ProxyProcess proxy = started(shared, "restored.Action");
        ProxyProcess twin = started(shared, "restored.Action");
        // Two slots, each with its own class loader and statics.
        overlapping(proxy, "two-slots", 2);
        Reply reply = restored(proxy, SEED_A);
        assertEquals(200, reply.status(), reply.body());
        assertTrue(reply.json().get("hook").getAsBoolean());
        assertEquals(List.of(1, 1), restoredCounts(overlapping(proxy, "both-restored", 2)));
        // A third slot loads the action after the restore: its statics are new, no call.
        assertEquals(List.of(0, 1, 1), restoredCounts(overlapping(proxy, "three", 3)));
        // The JDK's generators are one per JVM, whatever the slots.
        assertEquals(200, restored(proxy, SEED_A).status());
        assertEquals(200, restored(twin, SEED_A).status());
        assertEquals(run(twin).get("splittable"), run(proxy).get("splittable"));
    }

    /** __OW_API_HOST of the template, as iceboxd started it before the snapshot. */
    private static final String OLD_API_HOST = "http://10.0.0.1:3233";
    /** ... and of the new instance, sent in {@code env}. */
    private static final String NEW_API_HOST = "http://10.0.0.1:4100";

    private ProxyProcess startedWithOldApiHost(Map<String, String> env) {
        Map<String, String> all = new HashMap<>(env);
        all.put("__OW_API_HOST", OLD_API_HOST);
        return started(all, "restored.Env");
    }

    private static Reply restoredWithEnv(ProxyProcess proxy, String env) {
        return proxy.request("POST", "/icebox/restored",
                "{\"instance\": \"inst-1\", \"seed\": \"" + SEED_A + "\", \"env\": " + env + "}");
    }

    /** A /run with {@code activationId} (null: none) beside the value. */
    private static JsonObject run(ProxyProcess proxy, JsonObject value, String activationId) {
        JsonObject body = new JsonObject();
        body.add("value", value);
        if (activationId != null) {
            body.addProperty("activation_id", activationId);
        }
        Reply reply = proxy.request("POST", "/run", body.toString());
        assertEquals(200, reply.status(), reply.body());
        return reply.json();
    }

    private static JsonObject value(String key, String text) {
        JsonObject value = new JsonObject();
        value.addProperty(key, text);
        return value;
    }

    /** {@code parties} overlapping activations with ids latch-0, latch-1, ...; by id. */
    private List<JsonObject> overlappingWithIds(ProxyProcess proxy, String latch, int parties)
            throws Exception {
        JsonObject value = value("latch", latch);
        value.addProperty("parties", parties);
        clients = Executors.newFixedThreadPool(parties);
        List<Future<JsonObject>> runs = new ArrayList<>();
        for (int i = 0; i < parties; i++) {
            String id = latch + "-" + i;
            runs.add(clients.submit(() -> run(proxy, value, id)));
        }
        List<JsonObject> bodies = new ArrayList<>();
        for (Future<JsonObject> run : runs) {
            bodies.add(run.get(60, TimeUnit.SECONDS));
        }
        clients.shutdown();
        return bodies;
    }

    @Test
    void envIsSetBeforeTheHookAndSeenBySystemGetenvAndProcessBuilderEnvironment() {
        ProxyProcess proxy = startedWithOldApiHost(Map.of());
        assertEquals(OLD_API_HOST, run(proxy).get("getenv").getAsString());
        Reply reply = restoredWithEnv(proxy, "{\"__OW_API_HOST\": \"" + NEW_API_HOST + "\"}");
        assertEquals(200, reply.status(), reply.body());
        JsonArray names = new JsonArray();
        names.add("__OW_API_HOST");
        assertEquals(names, reply.json().get("env"));
        assertTrue(reply.json().get("hook").getAsBoolean());
        JsonObject seen = run(proxy, value("child", "yes"), "a1");
        assertEquals(NEW_API_HOST, seen.get("hookSaw").getAsString(), seen.toString());
        assertEquals(1, seen.get("hookCalls").getAsInt());
        assertEquals(OLD_API_HOST, seen.get("atLoad").getAsString(), "loaded before the restore");
        assertEquals(NEW_API_HOST, seen.get("getenv").getAsString());
        assertEquals(NEW_API_HOST, seen.get("map").getAsString());
        assertEquals(NEW_API_HOST, seen.get("childCopies").getAsString());
        // The documented limit: Java cannot change the C environment a child inherits when
        // the action does not hand it ProcessBuilder.environment().
        assertEquals(OLD_API_HOST, seen.get("childInherits").getAsString());
        assertEquals("a1", seen.get("activation").getAsString());
    }

    @Test
    void envAbsentOrEmptyChangesNothingAndTheNamesComeBackSorted() {
        ProxyProcess proxy = startedWithOldApiHost(Map.of());
        assertEquals("[]", restored(proxy, SEED_A).json().get("env").toString());
        assertEquals("[]", restoredWithEnv(proxy, "{}").json().get("env").toString());
        JsonObject seen = run(proxy);
        assertEquals(2, seen.get("hookCalls").getAsInt());
        assertEquals(OLD_API_HOST, seen.get("hookSaw").getAsString());
        assertEquals(OLD_API_HOST, seen.get("getenv").getAsString());
        Reply reply = restoredWithEnv(proxy, "{\"__OW_API_HOST\": \"" + NEW_API_HOST
                + "\", \"GOOD\": \"yes\"}");
        assertEquals("[\"GOOD\",\"__OW_API_HOST\"]", reply.json().get("env").toString());
        seen = run(proxy);
        assertEquals("yes", seen.get("good").getAsString());
        assertEquals(NEW_API_HOST, seen.get("getenv").getAsString());
    }

    @Test
    void aBadEnvIs400AndAppliesNothing() {
        ProxyProcess proxy = startedWithOldApiHost(Map.of());
        String host = "\"__OW_API_HOST\": \"" + NEW_API_HOST + "\"";
        String[][] cases = {
            {"[[\"__OW_API_HOST\", \"x\"]]", "\"env\" must be an object of environment variable"
                + " names to string values, got an array."},
            {"null", "\"env\" must be an object of environment variable names to string values,"
                + " got null."},
            {"\"__OW_API_HOST=x\"", "got a string."},
            {"{\"__OW_API_HOST\": 4100}", "\"env\" value of __OW_API_HOST must be a string, got a"
                + " number."},
            {"{\"__OW_API_HOST\": null}", "value of __OW_API_HOST must be a string, got null."},
            // Valid variables beside a bad one: none is set.
            {"{" + host + ", \"GOOD\": \"x\", \"A=B\": \"x\"}",
                "\"env\" has an invalid variable name \"A=B\" (empty, or with '=' or a NUL)."},
            {"{" + host + ", \"\": \"x\"}", "invalid variable name \"\""},
            {"{" + host + ", \"N\\u0000UL\": \"x\"}", "invalid variable name \"N\\u0000UL\""},
            {"{\"GOOD\": \"x\", \"__OW_API_HOST\": \"a\\u0000b\"}",
                "value of __OW_API_HOST contains a NUL character."},
        };
        for (String[] c : cases) {
            Reply reply = restoredWithEnv(proxy, c[0]);
            assertEquals(400, reply.status(), c[0]);
            assertTrue(reply.error().contains(c[1]), reply.error());
            JsonObject seen = run(proxy);
            assertEquals(OLD_API_HOST, seen.get("getenv").getAsString(), c[0]);
            assertTrue(seen.get("good").isJsonNull(), c[0]);
            assertEquals(0, seen.get("hookCalls").getAsInt(), c[0]);
        }
        // Nor were the JDK's generators reseeded: after a reseed with this seed, a new
        // SplittableRandom starts from one value, which the bad calls' runs did not see.
        JsonObject afterBad = run(proxy);
        assertEquals(200, restored(proxy, SEED_A).status());
        JsonObject afterGood = run(proxy);
        assertEquals(200, restored(proxy, SEED_A).status());
        assertEquals(afterGood.get("splittable"), run(proxy).get("splittable"));
        assertNotEquals(afterGood.get("splittable"), afterBad.get("splittable"));
    }

    @Test
    void sharedModeSlotsSeeTheNewValueBesideTheirOwnActivationValues() throws Exception {
        ProxyProcess proxy = startedWithOldApiHost(
                Map.of("ICEBOX_SHARING", "shared", "ICEBOX_CONCURRENCY", "3"));
        // Two slots, both loaded (and their statics initialised) before the restore.
        for (JsonObject seen : overlappingWithIds(proxy, "before", 2)) {
            assertEquals(OLD_API_HOST, seen.get("getenv").getAsString());
        }
        Reply bad = restoredWithEnv(proxy, "{\"__OW_API_HOST\": 4100}");
        assertEquals(400, bad.status(), bad.body());
        Reply reply = restoredWithEnv(proxy, "{\"__OW_API_HOST\": \"" + NEW_API_HOST + "\"}");
        assertEquals(200, reply.status(), reply.body());
        assertEquals("[\"__OW_API_HOST\"]", reply.json().get("env").toString());
        // The two slots and a third, loaded after the restore.
        List<JsonObject> seen = overlappingWithIds(proxy, "after", 3);
        List<String> activations = new ArrayList<>();
        List<String> slots = new ArrayList<>();
        for (JsonObject body : seen) {
            activations.add(body.get("activation").getAsString());
            assertEquals(NEW_API_HOST, body.get("getenv").getAsString(), body.toString());
            assertEquals(NEW_API_HOST, body.get("map").getAsString(), body.toString());
            slots.add(body.get("hookCalls").getAsInt() + " " + body.get("hookSaw") + " "
                    + body.get("atLoad").getAsString());
        }
        activations.sort(null);
        assertEquals(List.of("after-0", "after-1", "after-2"), activations);
        slots.sort(null);
        assertEquals(List.of("0 null " + NEW_API_HOST,
                "1 \"" + NEW_API_HOST + "\" " + OLD_API_HOST,
                "1 \"" + NEW_API_HOST + "\" " + OLD_API_HOST), slots);
    }
}

package icebox.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import icebox.proxy.ProxyProcess.Reply;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** ICEBOX_SHARING: the shared mode's class loader slots, the process mode, refused modes. */
class SharingModeTest {
    private ProxyProcess proxy;
    private ExecutorService clients;

    @AfterEach
    void stop() {
        if (clients != null) {
            clients.shutdownNow();
        }
        if (proxy != null) {
            proxy.close();
        }
    }

    private void start(String sharing, int concurrency) {
        proxy = ProxyProcess.start(Map.of("ICEBOX_SHARING", sharing,
                "ICEBOX_CONCURRENCY", Integer.toString(concurrency)));
        assertEquals(200, proxy.init("counter.Counter", CounterAction.jar()).status());
    }

    private Reply run(String activationId, JsonObject value) {
        JsonObject body = new JsonObject();
        body.add("value", value);
        body.addProperty("activation_id", activationId);
        return proxy.request("POST", "/run", body.toString());
    }

    private static JsonObject latch(String name) {
        JsonObject value = new JsonObject();
        value.addProperty("latch", name);
        return value;
    }

    /** Both activations wait for each other inside the action: they only return if overlapping. */
    private List<JsonObject> overlapping(JsonObject value) throws Exception {
        clients = Executors.newFixedThreadPool(2);
        List<Future<Reply>> runs = List.of(clients.submit(() -> run("act-a", value)),
                clients.submit(() -> run("act-b", value)));
        JsonObject a = runs.get(0).get(60, TimeUnit.SECONDS).json();
        JsonObject b = runs.get(1).get(60, TimeUnit.SECONDS).json();
        assertTrue(a.get("together").getAsBoolean(), a.toString());
        assertTrue(b.get("together").getAsBoolean(), b.toString());
        return List.of(a, b);
    }

    private JsonObject sharingStats() {
        return proxy.request("GET", "/icebox/stats", null).json().getAsJsonObject("sharing");
    }

    @Test
    void overlappingActivationsHaveTheirOwnStaticsAndEnvironment() throws Exception {
        start("shared", 2);
        List<JsonObject> both = overlapping(latch("overlap"));
        JsonObject a = both.get(0);
        JsonObject b = both.get(1);
        assertEquals(1, a.get("count").getAsInt(), a.toString());
        assertEquals(1, b.get("count").getAsInt(), b.toString());
        assertNotEquals(a.get("loader").getAsInt(), b.get("loader").getAsInt());
        // The proxy's classes (Gson here) are one copy for every slot.
        assertEquals(a.get("gson_loader").getAsInt(), b.get("gson_loader").getAsInt());
        // Read after the latch, when both activations have started: no leak either way.
        for (JsonObject r : both) {
            String own = r.get("activation_before").getAsString();
            assertEquals(own, r.get("activation").getAsString(), r.toString());
            assertEquals(own, r.get("all_env_activation").getAsString(), r.toString());
        }
        assertNotEquals(a.get("activation").getAsString(), b.get("activation").getAsString());

        JsonObject sharing = sharingStats();
        assertEquals("shared", sharing.get("mode").getAsString());
        assertEquals(2, sharing.get("capacity").getAsInt());
        assertEquals(0, sharing.get("in_flight").getAsInt());
        JsonObject contexts = sharing.getAsJsonObject("contexts");
        assertEquals(2, contexts.get("live").getAsInt());
        assertEquals(0, contexts.get("busy").getAsInt());
        assertEquals(2, contexts.get("created").getAsInt());
    }

    @Test
    void sequentialActivationsReuseASlotAndItsStatics() {
        start("shared", 4);
        JsonObject first = run("s-1", new JsonObject()).json();
        JsonObject second = run("s-2", new JsonObject()).json();
        JsonObject third = run("s-3", new JsonObject()).json();
        assertEquals(1, first.get("count").getAsInt());
        assertEquals(2, second.get("count").getAsInt());
        assertEquals(3, third.get("count").getAsInt());
        assertEquals(first.get("loader").getAsInt(), third.get("loader").getAsInt());
        assertEquals("s-3", third.get("activation").getAsString());
        JsonObject contexts = sharingStats().getAsJsonObject("contexts");
        assertEquals(1, contexts.get("created").getAsInt());
        assertEquals(1, contexts.get("live").getAsInt());
    }

    @Test
    void statsCountARunningActivation() throws Exception {
        start("shared", 2);
        // Waits inside the action until the second party below arrives.
        JsonObject held = latch("release");
        clients = Executors.newFixedThreadPool(1);
        Future<Reply> running = clients.submit(() -> run("held", held));
        JsonObject sharing = sharingStats();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (sharing.get("in_flight").getAsInt() == 0) {
            assertTrue(System.nanoTime() < deadline, "the activation never started");
            Thread.sleep(10);
            sharing = sharingStats();
        }
        assertEquals(1, sharing.get("in_flight").getAsInt());
        assertEquals(1, sharing.getAsJsonObject("contexts").get("busy").getAsInt());

        // The second party: overlaps the held one in a second slot and lets it finish.
        JsonObject second = run("releaser", held).json();
        assertTrue(second.get("together").getAsBoolean());
        assertTrue(running.get(60, TimeUnit.SECONDS).json().get("together").getAsBoolean());
        assertEquals(0, sharingStats().get("in_flight").getAsInt());
    }

    @Test
    void processModeSharesTheStaticsAsBefore() throws Exception {
        start("process", 2);
        List<JsonObject> both = overlapping(latch("process"));
        assertEquals(both.get(0).get("loader").getAsInt(), both.get(1).get("loader").getAsInt());
        int sum = both.get(0).get("count").getAsInt() + both.get(1).get("count").getAsInt();
        assertEquals(3, sum, both.toString());

        JsonObject sharing = sharingStats();
        assertEquals("process", sharing.get("mode").getAsString());
        assertEquals(2, sharing.get("capacity").getAsInt());
        assertEquals(0, sharing.get("in_flight").getAsInt());
        assertFalse(sharing.has("contexts"));
    }

    @Test
    void withoutTheVariableTheModeIsProcess() {
        proxy = ProxyProcess.start();
        JsonObject sharing = sharingStats();
        assertEquals("process", sharing.get("mode").getAsString());
        assertEquals(1, sharing.get("capacity").getAsInt());
    }

    @Test
    void sharedModeBeforeInitReportsNoContexts() {
        proxy = ProxyProcess.start(Map.of("ICEBOX_SHARING", "shared", "ICEBOX_CONCURRENCY", "3"));
        JsonObject sharing = sharingStats();
        assertEquals(3, sharing.get("capacity").getAsInt());
        assertEquals(0, sharing.getAsJsonObject("contexts").get("live").getAsInt());
    }

    @Test
    void isolateModeIsRefusedAtStartUp() {
        proxy = ProxyProcess.launch(Map.of("ICEBOX_SHARING", "isolate"), true, false);
        assertEquals(1, proxy.waitForExit());
        assertTrue(proxy.stderr().contains("ICEBOX_SHARING=isolate is not supported"),
                proxy.stderr());
    }

    @Test
    void unknownModeIsRefusedAtStartUp() {
        proxy = ProxyProcess.launch(Map.of("ICEBOX_SHARING", "pooled"), true, false);
        assertEquals(1, proxy.waitForExit());
        assertTrue(proxy.stderr().contains(
                "ICEBOX_SHARING must be process, shared or isolate, got 'pooled'"),
                proxy.stderr());
    }

    @Test
    void sharingModesParse() {
        assertEquals(SharingMode.PROCESS, SharingMode.parse(null));
        assertEquals(SharingMode.PROCESS, SharingMode.parse(""));
        assertEquals(SharingMode.PROCESS, SharingMode.parse("process"));
        assertEquals(SharingMode.SHARED, SharingMode.parse("shared"));
        assertThrows(IllegalArgumentException.class, () -> SharingMode.parse("isolate"));
        assertThrows(IllegalArgumentException.class, () -> SharingMode.parse("Shared"));
    }
}

package icebox.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import icebox.proxy.ProxyProcess.Reply;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Start-up and /init, each test against a fresh proxy process. */
class ProxyInitTest {
    private ProxyProcess proxy;

    @AfterEach
    void stop() {
        if (proxy != null) {
            proxy.close();
        }
    }

    private Reply init(String main) {
        return proxy.init(main, TestActions.jar());
    }

    @Test
    void initThenRunWithoutAnyOutputBeforeTheFirstRun() {
        proxy = ProxyProcess.start();
        Reply reply = init("demo.Action");
        assertEquals(200, reply.status());
        assertTrue(reply.json().get("ok").getAsBoolean());
        assertEquals("", proxy.stdout());
        assertEquals("", proxy.stderr());

        JsonObject value = new JsonObject();
        value.addProperty("name", "Ada");
        Reply run = proxy.run(value);
        assertEquals(200, run.status());
        assertEquals("Hello Ada", run.json().get("greeting").getAsString());
    }

    @Test
    void runBeforeInitIs403() {
        proxy = ProxyProcess.start();
        Reply reply = proxy.run(new JsonObject());
        assertEquals(403, reply.status());
        assertEquals("Cannot invoke an uninitialized action.", reply.error());
    }

    @Test
    void methodAfterHashIsTheEntryPoint() {
        proxy = ProxyProcess.start();
        assertEquals(200, init("demo.Action#array").status());
        Reply reply = proxy.run(new JsonObject());
        assertEquals(502, reply.status());
        assertEquals("The action did not return a dictionary.", reply.error());
    }

    @Test
    void missingClassIs502AndInitCanBeRetried() {
        proxy = ProxyProcess.start();
        Reply reply = init("demo.Nope");
        assertEquals(502, reply.status());
        assertEquals("Class 'demo.Nope' was not found in the action jar.", reply.error());
        assertEquals(200, init("demo.Action").status());
    }

    @Test
    void missingMethodIs502() {
        proxy = ProxyProcess.start();
        Reply reply = init("demo.Action#nope");
        assertEquals(502, reply.status());
        assertEquals("Class 'demo.Action' has no public method"
                + " 'nope(com.google.gson.JsonObject)'.", reply.error());
    }

    @Test
    void instanceMethodIs502() {
        proxy = ProxyProcess.start();
        Reply reply = init("demo.Action#instance");
        assertEquals(502, reply.status());
        assertEquals("Method 'demo.Action#instance' must be static.", reply.error());
    }

    @Test
    void failingStaticInitialiserIs502() {
        proxy = ProxyProcess.start(Map.of("FAIL_IN_STATIC_INIT", "1"));
        Reply reply = init("demo.Action");
        assertEquals(502, reply.status());
        assertEquals("Initialising class 'demo.Action' failed:"
                + " java.lang.IllegalStateException: static init failed", reply.error());
    }

    @Test
    void jarWithParentDirectoryEntryIsRejected() {
        proxy = ProxyProcess.start();
        Reply reply = proxy.init("demo.Action", TestJars.withEntries("ok.txt", "a/../../evil.class"));
        assertEquals(502, reply.status());
        assertTrue(reply.error().contains("unsafe entry name 'a/../../evil.class'"), reply.body());
    }

    @Test
    void jarWithAbsoluteEntryIsRejected() {
        proxy = ProxyProcess.start();
        Reply reply = proxy.init("demo.Action", TestJars.withEntries("/etc/evil"));
        assertEquals(502, reply.status());
        assertTrue(reply.error().contains("unsafe entry name '/etc/evil'"), reply.body());
    }

    @Test
    void codeThatIsNotAJarIs502() {
        proxy = ProxyProcess.start();
        Reply reply = proxy.init("demo.Action",
                "definitely not a zip file".getBytes(StandardCharsets.US_ASCII));
        assertEquals(502, reply.status());
        assertTrue(reply.error().startsWith("The action code is not a valid jar"), reply.body());
    }

    @Test
    void sourceCodeIsRejected() {
        proxy = ProxyProcess.start();
        JsonObject value = new JsonObject();
        value.addProperty("main", "demo.Action");
        value.addProperty("binary", false);
        value.addProperty("code", "public class Action {}");
        Reply reply = proxy.init(value);
        assertEquals(502, reply.status());
        assertTrue(reply.error().startsWith("Java actions must be a jar"), reply.body());
    }

    @Test
    void malformedInitIs400() {
        proxy = ProxyProcess.start();
        assertEquals(400, proxy.request("POST", "/init", "{\"value\": {").status());
        assertEquals(400, proxy.request("POST", "/init", "{\"code\": \"x\"}").status());
        assertEquals(200, init("demo.Action").status());
    }

    @Test
    void initEnvIsVisibleToTheAction() {
        proxy = ProxyProcess.start();
        JsonObject value = new JsonObject();
        value.addProperty("main", "demo.Action");
        value.addProperty("binary", true);
        value.addProperty("code", Base64.getEncoder().encodeToString(TestActions.jar()));
        JsonObject env = new JsonObject();
        env.addProperty("GREETING_STYLE", "formal");
        env.addProperty("RETRIES", 3);
        value.add("env", env);
        assertEquals(200, proxy.init(value).status());

        JsonObject run = new JsonObject();
        run.addProperty("mode", "env");
        JsonArray names = new JsonArray();
        names.add("GREETING_STYLE");
        names.add("RETRIES");
        run.add("names", names);
        JsonObject seen = proxy.run(run).json();
        assertEquals("formal", seen.get("GREETING_STYLE").getAsString());
        assertEquals("3", seen.get("RETRIES").getAsString());
    }

    @Test
    void concurrencyAllowsOverlappingRuns() throws Exception {
        proxy = ProxyProcess.start(Map.of("ICEBOX_CONCURRENCY", "2"));
        assertEquals(200, init("demo.Action").status());
        JsonObject value = new JsonObject();
        value.addProperty("mode", "together");
        // Each run waits for the other: both succeed only if the proxy ran them at once.
        ExecutorService clients = Executors.newFixedThreadPool(2);
        try {
            List<Future<Reply>> runs = List.of(
                    clients.submit(() -> proxy.run(value)), clients.submit(() -> proxy.run(value)));
            for (Future<Reply> run : runs) {
                Reply reply = run.get(60, TimeUnit.SECONDS);
                assertEquals(200, reply.status());
                assertTrue(reply.json().get("together").getAsBoolean());
            }
        } finally {
            clients.shutdownNow();
        }
    }

    @Test
    void staleSocketFileIsReplaced() {
        proxy = ProxyProcess.startOverStaleSocket();
        assertEquals(200, proxy.request("GET", "/icebox/stats", null).status());
    }

    @Test
    void missingSocketVariableIsFatal() {
        proxy = ProxyProcess.launch(Map.of(), false, false);
        assertEquals(1, proxy.waitForExit());
        assertTrue(proxy.stderr().contains("ICEBOX_PROXY_SOCKET is not set"), proxy.stderr());
    }

    @Test
    void invalidConcurrencyIsFatal() {
        proxy = ProxyProcess.launch(Map.of("ICEBOX_CONCURRENCY", "zero"), true, false);
        assertEquals(1, proxy.waitForExit());
        assertTrue(proxy.stderr().contains("ICEBOX_CONCURRENCY"), proxy.stderr());
    }
}

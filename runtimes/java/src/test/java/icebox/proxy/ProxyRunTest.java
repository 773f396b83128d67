package icebox.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import icebox.proxy.ProxyProcess.Client;
import icebox.proxy.ProxyProcess.Reply;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/** /run and the other endpoints against one proxy, initialised once with the test action. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ProxyRunTest {
    private static final String SENTINEL = "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n";

    private ProxyProcess proxy;

    @BeforeAll
    void start() {
        proxy = ProxyProcess.start();
        assertEquals(200, proxy.init("demo.Action", TestActions.jar()).status());
    }

    @AfterAll
    void stop() {
        proxy.close();
    }

    private static JsonObject mode(String mode) {
        JsonObject value = new JsonObject();
        value.addProperty("mode", mode);
        return value;
    }

    @Test
    void runReturnsTheActionResult() {
        Reply reply = proxy.request("POST", "/run",
                "{\"value\":{\"name\":\"Ada\",\"big\":123456789012345678901234567890,\"d\":1.50}}");
        assertEquals(200, reply.status());
        assertEquals("application/json", reply.headers().get("content-type"));
        JsonObject result = reply.json();
        assertEquals("Hello Ada", result.get("greeting").getAsString());
        // Numbers reach the action and come back exactly as sent.
        assertTrue(reply.body().contains("\"big\":123456789012345678901234567890"), reply.body());
        assertTrue(reply.body().contains("\"d\":1.50"), reply.body());
    }

    @Test
    void exceptionIs502AndTheProxyLivesOn() {
        Reply reply = proxy.run(mode("throw"));
        assertEquals(502, reply.status());
        assertEquals("java.lang.IllegalStateException: boom", reply.error());
        assertTrue(proxy.stderr().contains("java.lang.IllegalStateException: boom"));

        JsonObject value = new JsonObject();
        value.addProperty("name", "again");
        assertEquals(200, proxy.run(value).status());
    }

    @Test
    void nullResultIs502() {
        Reply reply = proxy.run(mode("null"));
        assertEquals(502, reply.status());
        assertEquals("The action did not return a dictionary.", reply.error());
    }

    @Test
    void errorResultIsPassedThroughAs502() {
        Reply reply = proxy.run(mode("error"));
        assertEquals(502, reply.status());
        assertEquals("application failed", reply.error());
    }

    @Test
    void resultThatIsNotJsonIs502() {
        Reply reply = proxy.run(mode("nan"));
        assertEquals(502, reply.status());
        assertTrue(reply.error().startsWith("The action result is not valid JSON"), reply.body());
    }

    @Test
    void activationFieldsAreVisibleAsEnvironmentVariables() {
        JsonArray names = new JsonArray();
        for (String n : new String[] {"__OW_ACTIVATION_ID", "__OW_NAMESPACE", "__OW_ACTION_NAME",
            "__OW_TRANSACTION_ID", "__OW_API_KEY", "__OW_DEADLINE", "__OW_ACTION_VERSION"}) {
            names.add(n);
        }
        JsonObject value = mode("env");
        value.add("names", names);
        JsonObject body = new JsonObject();
        body.add("value", value);
        body.addProperty("activation_id", "a-1");
        body.addProperty("namespace", "guest");
        body.addProperty("action_name", "/guest/hello");
        body.addProperty("transaction_id", "tx-1");
        body.addProperty("api_key", "key:secret");
        body.addProperty("deadline", "1700000000000");
        body.addProperty("action_version", "0.0.7");

        JsonObject env = proxy.request("POST", "/run", body.toString()).json();
        assertEquals("a-1", env.get("__OW_ACTIVATION_ID").getAsString());
        assertEquals("guest", env.get("__OW_NAMESPACE").getAsString());
        assertEquals("/guest/hello", env.get("__OW_ACTION_NAME").getAsString());
        assertEquals("tx-1", env.get("__OW_TRANSACTION_ID").getAsString());
        assertEquals("key:secret", env.get("__OW_API_KEY").getAsString());
        assertEquals("1700000000000", env.get("__OW_DEADLINE").getAsString());
        assertEquals("0.0.7", env.get("__OW_ACTION_VERSION").getAsString());

        // Absent in the next activation: unset, not left over from the previous one.
        body.remove("activation_id");
        body.remove("api_key");
        env = proxy.request("POST", "/run", body.toString()).json();
        assertTrue(env.get("__OW_ACTIVATION_ID").isJsonNull(), env.toString());
        assertTrue(env.get("__OW_API_KEY").isJsonNull(), env.toString());
        assertEquals("guest", env.get("__OW_NAMESPACE").getAsString());
    }

    @Test
    void sentinelEndsEveryActivationOnStdoutAndStderr() {
        assertEquals(200, proxy.run(mode("print")).status());
        assertTrue(proxy.stdout().endsWith("to stdout\n" + SENTINEL), proxy.stdout());
        assertTrue(proxy.stderr().endsWith("to stderr\n" + SENTINEL), proxy.stderr());

        assertEquals(502, proxy.run(mode("null")).status());
        assertTrue(proxy.stdout().endsWith(SENTINEL + SENTINEL), proxy.stdout());
        assertTrue(proxy.stderr().endsWith(SENTINEL + SENTINEL), proxy.stderr());
    }

    @Test
    void oneConnectionCarriesManyRequests() {
        try (Client client = proxy.connect()) {
            for (int i = 0; i < 3; i++) {
                Reply reply = client.send("POST", "/run", "{\"value\":{\"name\":\"n" + i + "\"}}");
                assertEquals(200, reply.status());
                assertEquals("Hello n" + i, reply.json().get("greeting").getAsString());
            }
            assertEquals(200, client.send("GET", "/icebox/stats", null).status());
        }
    }

    @Test
    void malformedJsonIs400AndTheProxyLivesOn() {
        for (String body : new String[] {"{\"value\":", "{'value': {}}", "[1]", "{} {}",
            "{\"value\": 3}", ""}) {
            Reply reply = proxy.request("POST", "/run", body);
            assertEquals(400, reply.status(), body);
            assertFalse(reply.error().isEmpty());
        }
        assertEquals(200, proxy.request("POST", "/run", "{\"value\":{\"name\":\"x\"}}").status());
    }

    @Test
    void statsDescribeTheHeap() {
        JsonObject stats = proxy.request("GET", "/icebox/stats", null).json();
        assertEquals("java", stats.get("runtime").getAsString());
        assertTrue(stats.get("heap_used_bytes").getAsLong() > 0);
        assertTrue(stats.get("heap_committed_bytes").getAsLong()
                >= stats.get("heap_used_bytes").getAsLong());
        assertTrue(stats.get("gc_count").getAsLong() >= 0);
        assertTrue(stats.get("gc_time_ms").getAsLong() >= 0);
        assertTrue(stats.get("live_bytes").isJsonNull());
        JsonObject details = stats.getAsJsonObject("details");
        assertTrue(details.getAsJsonObject("collectors").has("MarkSweepCompact"), details.toString());
        assertTrue(details.getAsJsonObject("pools").has("Tenured Gen"), details.toString());
    }

    @Test
    void statsWithGcRunsAFullCollectionFirst() {
        long before = proxy.request("GET", "/icebox/stats", null).json()
                .getAsJsonObject("details").getAsJsonObject("collectors")
                .getAsJsonObject("MarkSweepCompact").get("count").getAsLong();
        JsonObject stats = proxy.request("GET", "/icebox/stats?gc=1", null).json();
        long after = stats.getAsJsonObject("details").getAsJsonObject("collectors")
                .getAsJsonObject("MarkSweepCompact").get("count").getAsLong();
        assertTrue(after > before, before + " -> " + after);
        assertEquals(stats.get("heap_used_bytes").getAsLong(), stats.get("live_bytes").getAsLong());
        assertTrue(stats.get("live_bytes").getAsLong() > 0);
    }

    @Test
    void unknownPathIs404AndWrongMethodIs405() {
        Reply missing = proxy.request("GET", "/nope", null);
        assertEquals(404, missing.status());
        assertFalse(missing.error().isEmpty());

        Reply wrong = proxy.request("GET", "/run", null);
        assertEquals(405, wrong.status());
        assertEquals("POST", wrong.headers().get("allow"));
        assertEquals(405, proxy.request("POST", "/icebox/stats", "").status());
    }

    @Test
    void chunkedBodyIs400AndClosesTheConnection() {
        try (Client client = proxy.connect()) {
            Reply reply = client.sendRaw(("POST /run HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "2\r\n{}\r\n0\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            assertEquals(400, reply.status());
            assertEquals("close", reply.headers().get("connection"));
            assertTrue(client.isClosedByServer());
        }
    }

    @Test
    void oversizedBodyIs413() {
        try (Client client = proxy.connect()) {
            Reply reply = client.sendRaw(("POST /run HTTP/1.1\r\nContent-Length: "
                    + (Http1.MAX_BODY_BYTES + 1) + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            assertEquals(413, reply.status());
            assertTrue(client.isClosedByServer());
        }
        assertEquals(200, proxy.request("GET", "/icebox/stats", null).status());
    }

    @Test
    void secondInitIs403() {
        Reply reply = proxy.init("demo.Action", TestActions.jar());
        assertEquals(403, reply.status());
        assertEquals("Internal error. Cannot initialize the action more than once.",
                reply.error());
    }

    @Test
    void errorBodiesAreJson() {
        Reply reply = proxy.request("GET", "/\"quoted\"", null);
        assertEquals(404, reply.status());
        assertEquals("Not found: /\"quoted\"",
                JsonParser.parseString(reply.body()).getAsJsonObject().get("error").getAsString());
    }
}

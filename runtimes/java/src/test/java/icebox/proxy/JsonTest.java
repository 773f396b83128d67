package icebox.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class JsonTest {
    private static JsonElement parse(String text) {
        return Json.parse(text.getBytes(StandardCharsets.UTF_8));
    }

    private static String roundTrip(String text) {
        return new String(Json.serialize(parse(text)), StandardCharsets.UTF_8);
    }

    @Test
    void roundTripsValuesExactly() {
        String doc = "{\"s\":\"h\\u00e9 \\\"q\\\" <tag>\",\"i\":12345678901234567890123,\"d\":1.50,"
                + "\"e\":-2E+3,\"t\":true,\"f\":false,\"n\":null,\"a\":[1,[],{}],\"o\":{\"k\":\"v\"}}";
        assertEquals("{\"s\":\"hé \\\"q\\\" <tag>\",\"i\":12345678901234567890123,\"d\":1.50,"
                + "\"e\":-2E+3,\"t\":true,\"f\":false,\"n\":null,\"a\":[1,[],{}],\"o\":{\"k\":\"v\"}}",
                roundTrip(doc));
    }

    @Test
    void readsUtf8() {
        JsonObject o = parse("{\"name\":\"Zoë ✓\"}").getAsJsonObject();
        assertEquals("Zoë ✓", o.get("name").getAsString());
    }

    @Test
    void rejectsWhatIsNotStrictJson() {
        for (String bad : new String[] {"", "{", "{'a':1}", "{a:1}", "{\"a\":1,}", "[1,]",
            "{\"a\":NaN}", "{} {}", "{\"a\":1} x", "// c\n{}", "{\"a\":01}"}) {
            assertThrows(JsonParseException.class, () -> parse(bad), bad);
        }
    }

    @Test
    void refusesExcessiveNesting() {
        String deep = "[".repeat(Json.MAX_DEPTH + 1) + "]".repeat(Json.MAX_DEPTH + 1);
        assertThrows(JsonParseException.class, () -> parse(deep));
        String ok = "[".repeat(Json.MAX_DEPTH) + "]".repeat(Json.MAX_DEPTH);
        assertTrue(parse(ok).isJsonArray());
    }

    @Test
    void serializingNanOrACycleFails() {
        JsonObject nan = new JsonObject();
        nan.addProperty("x", Double.POSITIVE_INFINITY);
        assertThrows(IllegalArgumentException.class, () -> Json.serialize(nan));

        JsonArray cycle = new JsonArray();
        cycle.add(cycle);
        assertThrows(IllegalArgumentException.class, () -> Json.serialize(cycle));
    }

    @Test
    void textOfAStringIsTheStringAndOfAnythingElseItsJson() {
        assertEquals("plain", Json.text(parse("\"plain\"")));
        assertEquals("42", Json.text(parse("42")));
        assertEquals("{\"a\":[true]}", Json.text(parse("{\"a\":[true]}")));
    }

    @Test
    void errorBodiesEscapeTheMessage() {
        assertEquals("{\"error\":\"bad \\\"thing\\\"\\n\"}",
                new String(Json.error("bad \"thing\"\n"), StandardCharsets.UTF_8));
    }
}

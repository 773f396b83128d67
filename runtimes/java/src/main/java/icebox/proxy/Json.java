package icebox.proxy;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonPrimitive;
import com.google.gson.internal.LazilyParsedNumber;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;
import com.google.gson.stream.JsonWriter;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * Strict JSON trees in and out, built directly on Gson's streaming reader and writer.
 *
 * <p>Gson's own tree entry points are unsuitable twice over: they are lenient (JsonParser
 * accepts single quotes and comments, JsonElement.toString emits NaN, which iceboxd could not
 * parse), and they go through Gson's TypeAdapters, whose initialisation loads well over a
 * hundred classes on the first request, a large part of an action's cold start.
 */
final class Json {
    /** Deeper documents are refused instead of risking a StackOverflowError. */
    static final int MAX_DEPTH = 512;

    private Json() {}

    /** @throws JsonParseException when {@code body} is not exactly one JSON value */
    static JsonElement parse(byte[] body) {
        JsonReader reader = new JsonReader(new InputStreamReader(
                new ByteArrayInputStream(body), StandardCharsets.UTF_8));
        reader.setLenient(false);
        try {
            JsonElement element = read(reader, 0);
            if (reader.peek() != JsonToken.END_DOCUMENT) {
                throw new JsonParseException("unexpected data after the JSON value");
            }
            return element;
        } catch (IOException | IllegalStateException | NumberFormatException e) {
            throw new JsonParseException("malformed JSON: " + e.getMessage(), e);
        }
    }

    /**
     * @throws IllegalArgumentException when the tree holds a value JSON cannot express (NaN,
     *     infinities) or is nested deeper than {@link #MAX_DEPTH} (a cycle, for example)
     */
    static byte[] serialize(JsonElement element) {
        StringWriter out = new StringWriter(256);
        JsonWriter writer = new JsonWriter(out);
        writer.setLenient(false);
        try {
            write(writer, element, 0);
            writer.flush();
        } catch (IOException e) {
            throw new IllegalStateException("writing to a StringWriter failed", e);
        }
        return out.toString().getBytes(StandardCharsets.UTF_8);
    }

    /** A string as itself, any other value as JSON text: how values become environment text. */
    static String text(JsonElement element) {
        if (element.isJsonPrimitive() && element.getAsJsonPrimitive().isString()) {
            return element.getAsString();
        }
        return new String(serialize(element), StandardCharsets.UTF_8);
    }

    static byte[] error(String message) {
        JsonObject body = new JsonObject();
        body.addProperty("error", message);
        return serialize(body);
    }

    private static JsonElement read(JsonReader in, int depth) throws IOException {
        JsonToken token = in.peek();
        if (token == JsonToken.BEGIN_OBJECT || token == JsonToken.BEGIN_ARRAY) {
            if (depth >= MAX_DEPTH) {
                throw new JsonParseException("JSON nested deeper than " + MAX_DEPTH + " levels");
            }
            if (token == JsonToken.BEGIN_OBJECT) {
                JsonObject object = new JsonObject();
                in.beginObject();
                while (in.hasNext()) {
                    object.add(in.nextName(), read(in, depth + 1));
                }
                in.endObject();
                return object;
            }
            JsonArray array = new JsonArray();
            in.beginArray();
            while (in.hasNext()) {
                array.add(read(in, depth + 1));
            }
            in.endArray();
            return array;
        }
        if (token == JsonToken.STRING) {
            return new JsonPrimitive(in.nextString());
        }
        if (token == JsonToken.NUMBER) {
            // Kept as text, so integers of any size and decimals round-trip unchanged.
            return new JsonPrimitive(new LazilyParsedNumber(in.nextString()));
        }
        if (token == JsonToken.BOOLEAN) {
            return new JsonPrimitive(in.nextBoolean());
        }
        if (token == JsonToken.NULL) {
            in.nextNull();
            return JsonNull.INSTANCE;
        }
        throw new JsonParseException("malformed JSON: unexpected " + token);
    }

    private static void write(JsonWriter out, JsonElement element, int depth) throws IOException {
        if (element == null || element.isJsonNull()) {
            out.nullValue();
        } else if (element.isJsonPrimitive()) {
            JsonPrimitive p = element.getAsJsonPrimitive();
            if (p.isNumber()) {
                out.value(p.getAsNumber());
            } else if (p.isBoolean()) {
                out.value(p.getAsBoolean());
            } else {
                out.value(p.getAsString());
            }
        } else {
            if (depth >= MAX_DEPTH) {
                throw new IllegalArgumentException("nested deeper than " + MAX_DEPTH
                        + " levels (does it contain itself?)");
            }
            if (element.isJsonArray()) {
                out.beginArray();
                for (JsonElement item : element.getAsJsonArray()) {
                    write(out, item, depth + 1);
                }
                out.endArray();
            } else {
                out.beginObject();
                for (Map.Entry<String, JsonElement> e : element.getAsJsonObject().entrySet()) {
                    out.name(e.getKey());
                    write(out, e.getValue(), depth + 1);
                }
                out.endObject();
            }
        }
    }
}

import com.google.gson.JsonObject;

/** Greets {@code name} (default "stranger"). Deploy with main "Hello". */
public class Hello {
    public static JsonObject main(JsonObject args) {
        String name = args.has("name") ? args.get("name").getAsString() : "stranger";
        JsonObject result = new JsonObject();
        result.addProperty("greeting", "Hello, " + name + "!");
        return result;
    }
}

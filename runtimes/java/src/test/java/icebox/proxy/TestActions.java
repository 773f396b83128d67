package icebox.proxy;

import java.util.Map;

/** The action the process tests deploy, compiled once per test JVM. */
final class TestActions {
    private TestActions() {}

    static final String SOURCE = """
            package demo;

            import com.google.gson.JsonArray;
            import com.google.gson.JsonElement;
            import com.google.gson.JsonObject;
            import java.util.concurrent.CountDownLatch;
            import java.util.concurrent.TimeUnit;

            public class Action {
                private static final CountDownLatch BOTH = new CountDownLatch(2);

                static {
                    if (System.getenv("FAIL_IN_STATIC_INIT") != null) {
                        throw new IllegalStateException("static init failed");
                    }
                }

                public static JsonObject main(JsonObject args) throws Exception {
                    String mode = args.has("mode") ? args.get("mode").getAsString() : "echo";
                    JsonObject r = new JsonObject();
                    switch (mode) {
                        case "throw":
                            throw new IllegalStateException("boom");
                        case "null":
                            return null;
                        case "error":
                            r.addProperty("error", "application failed");
                            return r;
                        case "nan":
                            r.addProperty("x", Double.NaN);
                            return r;
                        case "print":
                            System.out.println("to stdout");
                            System.err.println("to stderr");
                            return r;
                        case "env":
                            for (JsonElement name : args.getAsJsonArray("names")) {
                                r.addProperty(name.getAsString(),
                                        System.getenv(name.getAsString()));
                            }
                            return r;
                        case "together":
                            BOTH.countDown();
                            r.addProperty("together", BOTH.await(20, TimeUnit.SECONDS));
                            return r;
                        default:
                            r.add("args", args);
                            r.addProperty("greeting", "Hello " + args.get("name").getAsString());
                            return r;
                    }
                }

                public static JsonElement array(JsonObject args) {
                    return new JsonArray();
                }

                public JsonObject instance(JsonObject args) {
                    return args;
                }
            }
            """;

    private static final class Holder {
        static final byte[] JAR = TestJars.compile(Map.of("demo.Action", SOURCE));
    }

    static byte[] jar() {
        return Holder.JAR;
    }
}

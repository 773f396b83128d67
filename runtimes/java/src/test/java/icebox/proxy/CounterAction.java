package icebox.proxy;

import java.util.Map;

/**
 * An action with a static counter, for the sharing modes: in the shared mode each class loader
 * slot has its own counter, in the process mode every activation shares one.
 */
final class CounterAction {
    private CounterAction() {}

    static final String SOURCE = """
            package counter;

            import com.google.gson.JsonObject;
            import java.util.concurrent.CountDownLatch;
            import java.util.concurrent.TimeUnit;

            public class Counter {
                private static int count;

                public static JsonObject main(JsonObject args) throws Exception {
                    int mine = ++count;
                    JsonObject r = new JsonObject();
                    r.addProperty("activation_before", System.getenv("__OW_ACTIVATION_ID"));
                    if (args.has("latch")) {
                        // The latch lives in the JDK's (shared) system properties: a static
                        // field of this class would be private to the slot in the shared mode.
                        int parties = args.has("parties") ? args.get("parties").getAsInt() : 2;
                        CountDownLatch latch = (CountDownLatch) System.getProperties()
                                .computeIfAbsent(args.get("latch").getAsString(),
                                        k -> new CountDownLatch(parties));
                        latch.countDown();
                        r.addProperty("together", latch.await(30, TimeUnit.SECONDS));
                    }
                    r.addProperty("count", mine);
                    r.addProperty("loader",
                            System.identityHashCode(Counter.class.getClassLoader()));
                    r.addProperty("gson_loader",
                            System.identityHashCode(JsonObject.class.getClassLoader()));
                    r.addProperty("activation", System.getenv("__OW_ACTIVATION_ID"));
                    r.addProperty("all_env_activation",
                            System.getenv().get("__OW_ACTIVATION_ID"));
                    return r;
                }
            }
            """;

    private static final class Holder {
        static final byte[] JAR = TestJars.compile(Map.of("counter.Counter", SOURCE));
    }

    static byte[] jar() {
        return Holder.JAR;
    }
}

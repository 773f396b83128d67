package icebox.proxy;

import java.util.Map;

/**
 * The action the reclaim tests deploy: known garbage, data kept across activations, and a run
 * that blocks on request.
 */
final class ReclaimActions {
    private ReclaimActions() {}

    static final String SOURCE = """
            package demo;

            import com.google.gson.JsonObject;
            import java.util.ArrayList;
            import java.util.List;
            import java.util.concurrent.CountDownLatch;
            import java.util.concurrent.TimeUnit;

            public class Garbage {
                private static final CountDownLatch RELEASE = new CountDownLatch(1);
                private static final CountDownLatch BLOCKED = new CountDownLatch(1);
                /** Live data that outlives activations, as a cache in a static would. */
                private static final List<byte[]> KEPT = new ArrayList<>();

                public static JsonObject main(JsonObject args) throws Exception {
                    String mode = args.has("mode") ? args.get("mode").getAsString() : "alloc";
                    JsonObject r = new JsonObject();
                    switch (mode) {
                        case "alloc": {
                            // Like examples/java Alloc: mb MiB of 1 KiB objects, all reachable
                            // until the last exists, garbage once this returns.
                            int mb = args.has("mb") ? args.get("mb").getAsInt() : 64;
                            List<byte[]> objects = new ArrayList<>();
                            long sum = 0;
                            for (int i = 0; i < mb * 1024; i++) {
                                byte[] b = new byte[1024];
                                b[0] = (byte) i;
                                objects.add(b);
                            }
                            for (byte[] b : objects) {
                                sum += b[0];
                            }
                            r.addProperty("objects", objects.size());
                            r.addProperty("sum", sum);
                            return r;
                        }
                        case "retain":
                            for (int i = 0; i < args.get("mb").getAsInt() * 1024; i++) {
                                KEPT.add(new byte[1024]);
                            }
                            r.addProperty("kept", KEPT.size());
                            return r;
                        case "block":
                            BLOCKED.countDown();
                            r.addProperty("released", RELEASE.await(20, TimeUnit.SECONDS));
                            return r;
                        case "blocked":
                            r.addProperty("blocked", BLOCKED.await(20, TimeUnit.SECONDS));
                            return r;
                        case "release":
                            RELEASE.countDown();
                            return r;
                        default:
                            r.addProperty("echo", mode);
                            return r;
                    }
                }
            }
            """;

    private static final class Holder {
        static final byte[] JAR = TestJars.compile(Map.of("demo.Garbage", SOURCE));
    }

    static byte[] jar() {
        return Holder.JAR;
    }
}

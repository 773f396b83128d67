package icebox.proxy;

import java.util.Map;

/** Actions for /icebox/restored, compiled once per test JVM. */
final class RestoredActions {
    private RestoredActions() {}

    /**
     * Reports the random state the proxy reseeds, as the action sees it, and how often its
     * hook ran in this class loader. {@code hook=throw} makes the hook throw; {@code latch}
     * holds activations until {@code parties} of them meet, as in {@link CounterAction}.
     */
    static final String SOURCE = """
            package restored;

            import com.google.gson.JsonArray;
            import com.google.gson.JsonObject;
            import java.lang.reflect.Field;
            import java.util.ArrayList;
            import java.util.Collections;
            import java.util.List;
            import java.util.SplittableRandom;
            import java.util.concurrent.CountDownLatch;
            import java.util.concurrent.TimeUnit;
            import java.util.concurrent.atomic.AtomicLong;

            public class Action {
                private static int restored;

                static {
                    // Makes Collections.shuffle's generator during /init, as in a snapshot.
                    Collections.shuffle(new ArrayList<>(List.of(1, 2, 3)));
                }

                public static void iceboxRestored() {
                    if ("throw".equals(System.getProperty("restored.hook"))) {
                        throw new IllegalStateException("cannot reconnect");
                    }
                    System.out.println("hook ran");
                    restored++;
                }

                public static JsonObject main(JsonObject args) throws Exception {
                    if (args.has("hook")) {
                        System.setProperty("restored.hook", args.get("hook").getAsString());
                    }
                    if (args.has("latch")) {
                        int parties = args.get("parties").getAsInt();
                        CountDownLatch latch = (CountDownLatch) System.getProperties()
                                .computeIfAbsent(args.get("latch").getAsString(),
                                        k -> new CountDownLatch(parties));
                        latch.countDown();
                        latch.await(30, TimeUnit.SECONDS);
                    }
                    JsonObject r = new JsonObject();
                    r.addProperty("restored", restored);
                    JsonArray splittable = new JsonArray();
                    SplittableRandom generator = new SplittableRandom();
                    for (int i = 0; i < 3; i++) {
                        splittable.add(generator.nextLong());
                    }
                    r.add("splittable", splittable);
                    List<Integer> cards = new ArrayList<>();
                    for (int i = 0; i < 20; i++) {
                        cards.add(i);
                    }
                    Collections.shuffle(cards);
                    r.addProperty("shuffled", cards.toString());
                    // runtime.json opens java.util to the action too.
                    Field uniquifier = java.util.Random.class.getDeclaredField("seedUniquifier");
                    uniquifier.setAccessible(true);
                    r.addProperty("uniquifier", ((AtomicLong) uniquifier.get(null)).get());
                    return r;
                }
            }
            """;

    static final String INSTANCE_HOOK = """
            package restored;

            import com.google.gson.JsonObject;

            public class Instance {
                public void iceboxRestored() {}

                public static JsonObject main(JsonObject args) {
                    return new JsonObject();
                }
            }
            """;

    /**
     * Reports {@code __OW_API_HOST} as its hook saw it, as its static initialiser saw it (per
     * class loader), and as {@code main} sees it through every way the proxy offers; with
     * {@code child}, also as child processes see it: one started with the JVM's own (C)
     * environment, one given {@code ProcessBuilder.environment()}, a copy of the JDK's map.
     * {@code latch} as in {@link #SOURCE}.
     */
    static final String ENV = """
            package restored;

            import com.google.gson.JsonObject;
            import java.nio.charset.StandardCharsets;
            import java.util.SplittableRandom;
            import java.util.concurrent.CountDownLatch;
            import java.util.concurrent.TimeUnit;

            public class Env {
                private static final String AT_LOAD = System.getenv("__OW_API_HOST");
                private static String hookSaw;
                private static int hookCalls;

                public static void iceboxRestored() {
                    hookSaw = System.getenv("__OW_API_HOST");
                    hookCalls++;
                }

                public static JsonObject main(JsonObject args) throws Exception {
                    if (args.has("latch")) {
                        int parties = args.get("parties").getAsInt();
                        CountDownLatch latch = (CountDownLatch) System.getProperties()
                                .computeIfAbsent(args.get("latch").getAsString(),
                                        k -> new CountDownLatch(parties));
                        latch.countDown();
                        latch.await(30, TimeUnit.SECONDS);
                    }
                    JsonObject r = new JsonObject();
                    r.addProperty("hookSaw", hookSaw);
                    r.addProperty("hookCalls", hookCalls);
                    r.addProperty("atLoad", AT_LOAD);
                    r.addProperty("getenv", System.getenv("__OW_API_HOST"));
                    r.addProperty("map", System.getenv().get("__OW_API_HOST"));
                    r.addProperty("good", System.getenv("GOOD"));
                    r.addProperty("activation", System.getenv("__OW_ACTIVATION_ID"));
                    // Whether the JDK's generators were reseeded (the same seed, the same value).
                    r.addProperty("splittable", new SplittableRandom().nextLong());
                    if (args.has("child")) {
                        ProcessBuilder inherits = new ProcessBuilder("printenv", "__OW_API_HOST");
                        r.addProperty("childInherits", output(inherits));
                        ProcessBuilder copies = new ProcessBuilder("printenv", "__OW_API_HOST");
                        copies.environment(); // a copy of the JDK's map, given to the child
                        r.addProperty("childCopies", output(copies));
                    }
                    return r;
                }

                private static String output(ProcessBuilder builder) throws Exception {
                    Process child = builder.start();
                    String out = new String(child.getInputStream().readAllBytes(),
                            StandardCharsets.UTF_8).strip();
                    child.waitFor();
                    return out;
                }
            }
            """;

    private static final class Holder {
        static final byte[] JAR = TestJars.compile(Map.of("restored.Action", SOURCE,
                "restored.Instance", INSTANCE_HOOK, "restored.Env", ENV));
    }

    static byte[] jar() {
        return Holder.JAR;
    }
}

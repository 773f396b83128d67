package icebox.proxy;

import com.google.gson.JsonObject;
import java.util.ArrayDeque;

/**
 * The shared mode (Photons): concurrent activations on threads of one JVM, each in a slot with
 * a class loader of its own, so the action's static fields are private to the slot while the
 * proxy, Gson, the JDK, the heap and the JIT are shared. Slots are created on demand up to the
 * capacity and reused afterwards; a reused slot keeps its statics, as a warm container keeps
 * its process.
 */
final class ClassLoaderSlots implements Invocable {
    private final Action template;
    private final int capacity;
    /** Most recently released first: the warmest slot is reused, the rest stay cold. */
    private final ArrayDeque<Action> idle = new ArrayDeque<>();
    private int busy;
    private int created;

    /** @param first the action loaded at /init, the first slot */
    ClassLoaderSlots(Action first, int capacity) {
        this.template = first;
        this.capacity = capacity;
        idle.push(first);
        created = 1;
    }

    @Override
    public Object invoke(JsonObject args) throws Throwable {
        Action slot = acquire();
        try {
            return slot.invoke(args);
        } finally {
            release(slot);
        }
    }

    private Action acquire() throws InitException {
        synchronized (this) {
            Action slot = idle.pollFirst();
            if (slot != null) {
                busy++;
                return slot;
            }
            if (created >= capacity) {
                // The proxy admits at most `capacity` activations at once.
                throw new IllegalStateException("no free class loader slot: more than "
                        + capacity + " activations at once");
            }
            created++;
            busy++;
        }
        // Outside the lock: loading runs the action's static initialisers, which may be slow.
        boolean ok = false;
        try {
            Action slot = template.loadAgain();
            ok = true;
            return slot;
        } finally {
            if (!ok) {
                synchronized (this) {
                    created--;
                    busy--;
                }
            }
        }
    }

    private synchronized void release(Action slot) {
        busy--;
        idle.push(slot);
    }

    /** The {@code contexts} object of the stats' {@code sharing}: class loaders. */
    synchronized JsonObject describe() {
        JsonObject contexts = new JsonObject();
        // Slots are never torn down (a failed load is uncounted), so all created are live.
        contexts.addProperty("live", created);
        contexts.addProperty("busy", busy);
        contexts.addProperty("created", created);
        return contexts;
    }
}

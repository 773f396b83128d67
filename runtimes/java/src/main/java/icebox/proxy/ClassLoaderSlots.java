package icebox.proxy;

import com.google.gson.JsonObject;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

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
    /** Every slot, idle or busy, in creation order. */
    private final List<Action> all = new ArrayList<>();
    private int busy;
    private int created;

    /** @param first the action loaded at /init, the first slot */
    ClassLoaderSlots(Action first, int capacity) {
        this.template = first;
        this.capacity = capacity;
        idle.push(first);
        all.add(first);
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
        Action slot = null;
        try {
            slot = template.loadAgain();
            return slot;
        } finally {
            synchronized (this) {
                if (slot != null) {
                    all.add(slot);
                } else {
                    created--;
                    busy--;
                }
            }
        }
    }

    /**
     * Calls the hook in every slot loaded so far, idle or busy (each has its own statics to
     * refresh), one after the other on the calling thread; a busy slot's activation goes on
     * meanwhile. Slots loaded later run their static initialisers after the restore and get
     * no call.
     */
    @Override
    public boolean restored() throws Throwable {
        List<Action> slots;
        synchronized (this) {
            slots = new ArrayList<>(all);
        }
        boolean hook = false;
        for (Action slot : slots) {
            hook |= slot.restored();
        }
        return hook;
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

package icebox.proxy;

import java.util.AbstractMap;
import java.util.AbstractSet;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;

/**
 * The process environment with the current thread's activation values laid over it: what
 * {@code System.getenv} reads in the shared mode, where overlapping activations run on
 * different threads of one JVM. A thread without activation values (the proxy's own, or one
 * the action started) sees the process environment alone, never another activation's values.
 */
final class ActivationEnvironment extends AbstractMap<String, String> {
    private final Map<String, String> base;
    // Not inheritable: a pooled thread an action starts would keep the first activation's
    // values for the life of the pool.
    private final ThreadLocal<Map<String, String>> own = new ThreadLocal<>();

    ActivationEnvironment(Map<String, String> base) {
        this.base = base;
    }

    /** {@code values}: name to value, or to null for a name this activation has unset. */
    /** Kept as given: the caller builds a fresh map per activation. */
    void setForThisThread(Map<String, String> values) {
        own.set(values);
    }

    void clearForThisThread() {
        own.remove();
    }

    @Override
    public String get(Object name) {
        Map<String, String> mine = own.get();
        if (mine != null && mine.containsKey(name)) {
            return mine.get(name);
        }
        return base.get(name);
    }

    @Override
    public boolean containsKey(Object name) {
        Map<String, String> mine = own.get();
        if (mine != null && mine.containsKey(name)) {
            return mine.get(name) != null;
        }
        return base.containsKey(name);
    }

    /** A live view: every iteration merges the calling thread's values at that moment. */
    @Override
    public Set<Map.Entry<String, String>> entrySet() {
        return new AbstractSet<>() {
            @Override
            public Iterator<Map.Entry<String, String>> iterator() {
                return snapshot().entrySet().iterator();
            }

            @Override
            public int size() {
                return snapshot().size();
            }
        };
    }

    private Map<String, String> snapshot() {
        Map<String, String> merged = new HashMap<>(base);
        Map<String, String> mine = own.get();
        if (mine != null) {
            for (Map.Entry<String, String> e : mine.entrySet()) {
                if (e.getValue() == null) {
                    merged.remove(e.getKey());
                } else {
                    merged.put(e.getKey(), e.getValue());
                }
            }
        }
        return merged;
    }
}

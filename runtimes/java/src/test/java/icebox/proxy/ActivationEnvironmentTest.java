package icebox.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class ActivationEnvironmentTest {
    @Test
    void aThreadSeesItsOwnValuesOverTheProcessEnvironment() throws Exception {
        Map<String, String> base = new HashMap<>(Map.of("PATH", "/bin", "__OW_API_KEY", "old"));
        ActivationEnvironment env = new ActivationEnvironment(base);
        Map<String, String> mine = new HashMap<>();
        mine.put("__OW_ACTIVATION_ID", "a-1");
        mine.put("__OW_API_KEY", null);
        env.setForThisThread(mine);

        assertEquals("a-1", env.get("__OW_ACTIVATION_ID"));
        assertNull(env.get("__OW_API_KEY"));
        assertFalse(env.containsKey("__OW_API_KEY"));
        assertEquals("/bin", env.get("PATH"));
        assertEquals(Map.of("PATH", "/bin", "__OW_ACTIVATION_ID", "a-1"), Map.copyOf(env));

        AtomicReference<String> other = new AtomicReference<>("unset");
        Thread thread = new Thread(() -> other.set(env.get("__OW_ACTIVATION_ID")));
        thread.start();
        thread.join();
        assertNull(other.get());

        env.clearForThisThread();
        assertEquals("old", env.get("__OW_API_KEY"));
        assertTrue(env.containsKey("__OW_API_KEY"));
    }
}

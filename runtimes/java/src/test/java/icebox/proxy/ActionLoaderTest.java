package icebox.proxy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class ActionLoaderTest {
    @Test
    void mainNamesAClassAndOptionallyAMethod() throws Exception {
        assertArrayEquals(new String[] {"a.B", "main"}, ActionLoader.parseMain("a.B"));
        assertArrayEquals(new String[] {"a.B", "handle"}, ActionLoader.parseMain("a.B#handle"));
        for (String bad : new String[] {"", "#m", "a.B#", "a#b#c"}) {
            assertThrows(InitException.class, () -> ActionLoader.parseMain(bad), bad);
        }
    }

    @Test
    void entriesThatEscapeTheJarAreUnsafe() {
        for (String name : new String[] {"..", "../x", "a/../../x", "a/..", "/etc/passwd",
            "\\windows", "a\\..\\x", "C:/x", "c:x"}) {
            assertTrue(ActionLoader.isUnsafeEntryName(name), name);
        }
        for (String name : new String[] {"a/B.class", "META-INF/MANIFEST.MF", "a..b/c", "...",
            "a/..b", "x/y..", "dir/"}) {
            assertFalse(ActionLoader.isUnsafeEntryName(name), name);
        }
    }
}

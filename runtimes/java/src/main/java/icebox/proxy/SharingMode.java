package icebox.proxy;

/**
 * ICEBOX_SHARING: how concurrent activations of one instance share the JVM (see
 * docs/runtime-protocol.md and the README, "Sharing modes").
 */
enum SharingMode {
    /** Today's behaviour: one action class loader, static fields shared by every activation. */
    PROCESS("process"),
    /** Photons: one JVM, a pooled class loader per concurrent slot, static fields per slot. */
    SHARED("shared");

    final String label;

    SharingMode(String label) {
        this.label = label;
    }

    /**
     * @param value ICEBOX_SHARING; absent or empty means {@code process}
     * @throws IllegalArgumentException with the start-up error to print
     */
    static SharingMode parse(String value) {
        if (value == null || value.isEmpty() || value.equals("process")) {
            return PROCESS;
        }
        if (value.equals("shared")) {
            return SHARED;
        }
        if (value.equals("isolate")) {
            // The daemon refuses the annotation for java kinds first; this is the backstop.
            throw new IllegalArgumentException("ICEBOX_SHARING=isolate is not supported by the"
                    + " Java runtime (isolates are for nodejs kinds only); use process or shared");
        }
        throw new IllegalArgumentException("ICEBOX_SHARING must be process, shared or isolate,"
                + " got '" + value + "'");
    }
}

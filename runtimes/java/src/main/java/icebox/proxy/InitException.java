package icebox.proxy;

/** The action could not be loaded; the message is returned to the caller of /init. */
final class InitException extends Exception {
    private static final long serialVersionUID = 1L;

    InitException(String message) {
        super(message, null, false, false);
    }
}

package icebox.proxy;

final class Throwables {
    private Throwables() {}

    /** {@code "<class>: <message>"}, or just the class name when there is no message. */
    static String describe(Throwable t) {
        String message = t.getMessage();
        return message == null ? t.getClass().getName() : t.getClass().getName() + ": " + message;
    }
}

package icebox.proxy;

/**
 * A request that cannot be served as sent. The connection is closed after the error response
 * because the position of the next request in the byte stream is no longer known.
 */
final class HttpException extends Exception {
    private static final long serialVersionUID = 1L;

    final int status;

    HttpException(int status, String message) {
        super(message, null, false, false);
        this.status = status;
    }
}

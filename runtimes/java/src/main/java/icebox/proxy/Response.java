package icebox.proxy;

import java.util.Map;

/** Status, JSON body and any extra header fields of one response. */
final class Response {
    final int status;
    final byte[] body;
    final Map<String, String> headers;

    private Response(int status, byte[] body, Map<String, String> headers) {
        this.status = status;
        this.body = body;
        this.headers = headers;
    }

    static Response json(int status, byte[] body) {
        return new Response(status, body, Map.of());
    }

    static Response error(int status, String message) {
        return new Response(status, Json.error(message), Map.of());
    }

    static Response methodNotAllowed(String allowed) {
        return new Response(405, Json.error("Method not allowed; use " + allowed + "."),
                Map.of("Allow", allowed));
    }
}

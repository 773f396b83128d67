package icebox.proxy;

import java.util.Map;

/**
 * One parsed HTTP/1.x request.
 *
 * @param headers lower-cased header names; repeated headers are joined with ", "
 * @param keepAlive whether the connection may carry another request after this one
 */
record HttpRequest(
        String method,
        String path,
        String query,
        Map<String, String> headers,
        byte[] body,
        boolean keepAlive) {

    /** Value of {@code name} in the query string ({@code a=1&b=2}), or null when absent. */
    String queryParameter(String name) {
        if (query == null || query.isEmpty()) {
            return null;
        }
        for (String pair : query.split("&")) {
            int eq = pair.indexOf('=');
            String key = eq < 0 ? pair : pair.substring(0, eq);
            if (key.equals(name)) {
                return eq < 0 ? "" : pair.substring(eq + 1);
            }
        }
        return null;
    }
}

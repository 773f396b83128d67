package icebox.proxy;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * A deliberately small and strict HTTP/1.1 server codec: request line, header fields and a
 * Content-Length body in; a Content-Length response out. The only peer is iceboxd, so anything
 * outside that subset (transfer codings, folded headers, absolute-form targets) is refused rather
 * than half-supported.
 */
final class Http1 {
    /** Request line plus all header lines. */
    static final int MAX_HEAD_BYTES = 16 * 1024;
    static final int MAX_HEADER_COUNT = 100;
    /**
     * Large enough for an OpenWhisk-sized action jar (48 MiB) after base64 and JSON wrapping.
     */
    static final long MAX_BODY_BYTES = 80L * 1024 * 1024;

    private static final byte[] CONTINUE = ascii("HTTP/1.1 100 Continue\r\n\r\n");

    private Http1() {}

    /**
     * Reads the next request from {@code in}.
     *
     * @param out where a {@code 100 Continue} interim response is written when the client asks
     *     for one; nothing else is written
     * @return the request, or null when the peer closed the connection between requests
     * @throws HttpException when the request is malformed or too large (answer, then close)
     * @throws EOFException when the peer closed the connection in the middle of a request
     */
    static HttpRequest readRequest(InputStream in, OutputStream out)
            throws IOException, HttpException {
        int[] headBudget = {MAX_HEAD_BYTES};
        String requestLine = readLine(in, headBudget, true);
        // RFC 9112 section 2.2: ignore at least one empty line before the request line.
        int blank = 0;
        while (requestLine != null && requestLine.isEmpty() && blank++ < 4) {
            requestLine = readLine(in, headBudget, true);
        }
        if (requestLine == null) {
            return null;
        }

        String[] parts = requestLine.split(" ", -1);
        if (parts.length != 3 || !isToken(parts[0]) || parts[1].isEmpty()) {
            throw new HttpException(400, "malformed request line");
        }
        String method = parts[0];
        String target = parts[1];
        String version = parts[2];
        if (version.length() != 8 || !version.startsWith("HTTP/") || !isDigit(version.charAt(5))
                || version.charAt(6) != '.' || !isDigit(version.charAt(7))) {
            throw new HttpException(400, "malformed HTTP version");
        }
        if (!version.equals("HTTP/1.1") && !version.equals("HTTP/1.0")) {
            throw new HttpException(505, "only HTTP/1.1 and HTTP/1.0 are supported");
        }
        if (target.charAt(0) != '/' || !isVisibleAscii(target)) {
            throw new HttpException(400, "request target must be an absolute path");
        }

        Map<String, String> headers = readHeaders(in, headBudget);
        if (headers.containsKey("transfer-encoding")) {
            throw new HttpException(400, "transfer codings (chunked) are not supported");
        }
        long length = contentLength(headers.get("content-length"));
        if (length > MAX_BODY_BYTES) {
            throw new HttpException(413, "request body exceeds " + MAX_BODY_BYTES + " bytes");
        }

        boolean http11 = version.equals("HTTP/1.1");
        if (http11 && length > 0 && "100-continue".equalsIgnoreCase(headers.get("expect"))) {
            out.write(CONTINUE);
            out.flush();
        }
        byte[] body = in.readNBytes((int) length);
        if (body.length != length) {
            throw new EOFException("connection closed inside the request body");
        }

        int q = target.indexOf('?');
        String path = q < 0 ? target : target.substring(0, q);
        String query = q < 0 ? null : target.substring(q + 1);
        return new HttpRequest(method, path, query, headers, body,
                keepAlive(http11, headers.get("connection")));
    }

    /** Writes a complete response with a JSON body in one write. */
    static void writeResponse(OutputStream out, int status, byte[] body, boolean close,
            Map<String, String> extraHeaders) throws IOException {
        StringBuilder head = new StringBuilder(128)
                .append("HTTP/1.1 ").append(status).append(' ').append(reason(status))
                .append("\r\nContent-Type: application/json\r\nContent-Length: ")
                .append(body.length).append("\r\n");
        for (Map.Entry<String, String> h : extraHeaders.entrySet()) {
            head.append(h.getKey()).append(": ").append(h.getValue()).append("\r\n");
        }
        if (close) {
            head.append("Connection: close\r\n");
        }
        head.append("\r\n");
        byte[] headBytes = ascii(head.toString());
        byte[] all = new byte[headBytes.length + body.length];
        System.arraycopy(headBytes, 0, all, 0, headBytes.length);
        System.arraycopy(body, 0, all, headBytes.length, body.length);
        out.write(all);
        out.flush();
    }

    static String reason(int status) {
        return switch (status) {
            case 200 -> "OK";
            case 400 -> "Bad Request";
            case 403 -> "Forbidden";
            case 404 -> "Not Found";
            case 405 -> "Method Not Allowed";
            case 413 -> "Content Too Large";
            case 431 -> "Request Header Fields Too Large";
            case 500 -> "Internal Server Error";
            case 501 -> "Not Implemented";
            case 502 -> "Bad Gateway";
            case 505 -> "HTTP Version Not Supported";
            default -> "Status " + status;
        };
    }

    private static Map<String, String> readHeaders(InputStream in, int[] headBudget)
            throws IOException, HttpException {
        Map<String, String> headers = new LinkedHashMap<>();
        int count = 0;
        for (;;) {
            String line = readLine(in, headBudget, false);
            if (line.isEmpty()) {
                return headers;
            }
            if (++count > MAX_HEADER_COUNT) {
                throw new HttpException(431, "too many header fields");
            }
            char first = line.charAt(0);
            if (first == ' ' || first == '\t') {
                throw new HttpException(400, "obsolete header line folding is not supported");
            }
            int colon = line.indexOf(':');
            // No whitespace is allowed between the field name and the colon (RFC 9112 5.1).
            if (colon <= 0 || !isToken(line.substring(0, colon))) {
                throw new HttpException(400, "malformed header field");
            }
            String name = line.substring(0, colon).toLowerCase(Locale.ROOT);
            String value = line.substring(colon + 1).strip();
            if (!isFieldValue(value)) {
                throw new HttpException(400, "invalid character in header field " + name);
            }
            String previous = headers.get(name);
            if (previous == null) {
                headers.put(name, value);
            } else if (name.equals("content-length")) {
                // Differing repeated lengths are a request-smuggling vector: refuse them.
                if (!previous.equals(value)) {
                    throw new HttpException(400, "conflicting Content-Length headers");
                }
            } else {
                headers.put(name, previous + ", " + value);
            }
        }
    }

    private static long contentLength(String value) throws HttpException {
        if (value == null) {
            return 0;
        }
        if (value.isEmpty() || value.length() > 18) {
            throw new HttpException(400, "invalid Content-Length");
        }
        long length = 0;
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (!isDigit(c)) {
                throw new HttpException(400, "invalid Content-Length");
            }
            length = length * 10 + (c - '0');
        }
        return length;
    }

    private static boolean keepAlive(boolean http11, String connection) {
        boolean close = false;
        boolean keep = false;
        if (connection != null) {
            for (String option : connection.split(",")) {
                String o = option.strip();
                close |= o.equalsIgnoreCase("close");
                keep |= o.equalsIgnoreCase("keep-alive");
            }
        }
        return !close && (http11 || keep);
    }

    /**
     * Reads one line terminated by CRLF (a bare LF is tolerated, RFC 9112 2.2) as ISO-8859-1.
     *
     * @param eofOk whether end of stream before the first byte is a clean close (null result)
     */
    private static String readLine(InputStream in, int[] budget, boolean eofOk)
            throws IOException, HttpException {
        ByteArrayOutputStream line = new ByteArrayOutputStream(64);
        boolean sawCr = false;
        for (;;) {
            int b = in.read();
            if (b < 0) {
                if (eofOk && line.size() == 0 && !sawCr) {
                    return null;
                }
                throw new EOFException("connection closed inside the request head");
            }
            if (--budget[0] < 0) {
                throw new HttpException(431, "request head exceeds " + MAX_HEAD_BYTES + " bytes");
            }
            if (b == '\n') {
                return line.toString(StandardCharsets.ISO_8859_1);
            }
            if (sawCr) {
                throw new HttpException(400, "bare CR in request head");
            }
            if (b == '\r') {
                sawCr = true;
            } else {
                line.write(b);
            }
        }
    }

    private static boolean isToken(String s) {
        if (s.isEmpty()) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            boolean ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c)
                    || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
            if (!ok) {
                return false;
            }
        }
        return true;
    }

    private static boolean isVisibleAscii(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c <= 0x20 || c >= 0x7f) {
                return false;
            }
        }
        return true;
    }

    private static boolean isFieldValue(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c != '\t' && (c < 0x20 || c == 0x7f)) {
                return false;
            }
        }
        return true;
    }

    private static boolean isDigit(int c) {
        return c >= '0' && c <= '9';
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }
}

package icebox.proxy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;

class Http1Test {
    private final ByteArrayOutputStream interim = new ByteArrayOutputStream();

    private HttpRequest parse(InputStream in) throws Exception {
        return Http1.readRequest(in, interim);
    }

    private HttpRequest parse(String raw) throws Exception {
        return parse(stream(raw));
    }

    private static InputStream stream(String raw) {
        return new ByteArrayInputStream(raw.getBytes(StandardCharsets.ISO_8859_1));
    }

    private int rejected(String raw) {
        return assertThrows(HttpException.class, () -> parse(raw)).status;
    }

    @Test
    void parsesRequestLineHeadersAndBody() throws Exception {
        HttpRequest r = parse("POST /run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                + "\r\nContent-Length: 2\r\n\r\n{}");
        assertEquals("POST", r.method());
        assertEquals("/run", r.path());
        assertNull(r.query());
        assertEquals("application/json", r.headers().get("content-type"));
        assertArrayEquals("{}".getBytes(StandardCharsets.US_ASCII), r.body());
        assertTrue(r.keepAlive());
    }

    @Test
    void splitsTheQueryString() throws Exception {
        HttpRequest r = parse("GET /icebox/stats?x=2&gc=1&flag HTTP/1.1\r\n\r\n");
        assertEquals("/icebox/stats", r.path());
        assertEquals("1", r.queryParameter("gc"));
        assertEquals("", r.queryParameter("flag"));
        assertNull(r.queryParameter("missing"));
        assertEquals(0, r.body().length);
    }

    @Test
    void readsPipelinedRequestsInOrderAndThenSignalsEndOfStream() throws Exception {
        InputStream in = stream("POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
                + "GET /b HTTP/1.1\r\n\r\n");
        assertEquals("abc", new String(parse(in).body(), StandardCharsets.US_ASCII));
        assertEquals("/b", parse(in).path());
        assertNull(parse(in));
    }

    @Test
    void headerNamesAreCaseInsensitiveAndValuesTrimmed() throws Exception {
        HttpRequest r = parse("GET / HTTP/1.1\r\nX-Thing:   spaced value \t\r\n"
                + "x-thing: second\r\n\r\n");
        assertEquals("spaced value, second", r.headers().get("x-thing"));
    }

    @Test
    void toleratesBareLineFeedsAndLeadingEmptyLines() throws Exception {
        HttpRequest r = parse("\r\nGET /x HTTP/1.1\nContent-Length: 1\n\nz");
        assertEquals("/x", r.path());
        assertEquals(1, r.body().length);
    }

    @Test
    void connectionCloseAndHttp10DisableKeepAlive() throws Exception {
        assertFalse(parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keepAlive());
        assertFalse(parse("GET / HTTP/1.0\r\n\r\n").keepAlive());
        assertTrue(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keepAlive());
        assertFalse(parse("GET / HTTP/1.1\r\nConnection: upgrade, close\r\n\r\n").keepAlive());
    }

    @Test
    void answersExpectContinueBeforeReadingTheBody() throws Exception {
        HttpRequest r = parse("POST /run HTTP/1.1\r\nExpect: 100-continue\r\n"
                + "Content-Length: 2\r\n\r\n{}");
        assertEquals(2, r.body().length);
        assertEquals("HTTP/1.1 100 Continue\r\n\r\n", interim.toString(StandardCharsets.US_ASCII));
    }

    @Test
    void rejectsTransferCodings() {
        assertEquals(400, rejected("POST /run HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "2\r\n{}\r\n0\r\n\r\n"));
    }

    @Test
    void rejectsOversizedBodiesBeforeReadingThem() {
        assertEquals(413, rejected("POST /run HTTP/1.1\r\nContent-Length: "
                + (Http1.MAX_BODY_BYTES + 1) + "\r\n\r\n"));
    }

    @Test
    void rejectsInvalidContentLength() {
        assertEquals(400, rejected("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"));
        assertEquals(400, rejected("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"));
        assertEquals(400, rejected("POST / HTTP/1.1\r\nContent-Length: \r\n\r\n"));
        assertEquals(400, rejected("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999"
                + "\r\n\r\n"));
        assertEquals(400, rejected("POST / HTTP/1.1\r\nContent-Length: 1\r\n"
                + "Content-Length: 2\r\n\r\nab"));
    }

    @Test
    void acceptsRepeatedIdenticalContentLength() throws Exception {
        HttpRequest r = parse("POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab");
        assertEquals(2, r.body().length);
    }

    @Test
    void rejectsMalformedRequestLines() {
        assertEquals(400, rejected("GET /\r\n\r\n"));
        assertEquals(400, rejected("GET  / HTTP/1.1\r\n\r\n"));
        assertEquals(400, rejected("GET / HTTP/1.1 extra\r\n\r\n"));
        assertEquals(400, rejected("G(T / HTTP/1.1\r\n\r\n"));
        assertEquals(400, rejected("GET http://host/ HTTP/1.1\r\n\r\n"));
        assertEquals(400, rejected("GET /a\u0001b HTTP/1.1\r\n\r\n"));
        assertEquals(400, rejected("GET / HTTX/1.1\r\n\r\n"));
        assertEquals(505, rejected("GET / HTTP/2.0\r\n\r\n"));
    }

    @Test
    void rejectsMalformedHeaders() {
        assertEquals(400, rejected("GET / HTTP/1.1\r\nNoColon\r\n\r\n"));
        assertEquals(400, rejected("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"));
        assertEquals(400, rejected("GET / HTTP/1.1\r\nName : x\r\n\r\n"));
        assertEquals(400, rejected("GET / HTTP/1.1\r\n: x\r\n\r\n"));
        assertEquals(400, rejected("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n"));
        assertEquals(400, rejected("GET / HTTP/1.1\r\nA: b\u0000c\r\n\r\n"));
        assertEquals(400, rejected("GET / HTTP/1.1\r\nA: b\rc\r\n\r\n"));
    }

    @Test
    void rejectsOversizedHeads() {
        String big = "x".repeat(Http1.MAX_HEAD_BYTES);
        assertEquals(431, rejected("GET / HTTP/1.1\r\nA: " + big + "\r\n\r\n"));
        StringBuilder many = new StringBuilder("GET / HTTP/1.1\r\n");
        for (int i = 0; i <= Http1.MAX_HEADER_COUNT; i++) {
            many.append("H").append(i).append(": v\r\n");
        }
        assertEquals(431, rejected(many.append("\r\n").toString()));
    }

    @Test
    void endOfStreamInsideARequestIsAnEofNotAnEmptyRequest() {
        assertThrows(EOFException.class, () -> parse("GET / HTTP/1.1\r\nHost: x"));
        assertThrows(EOFException.class, () -> parse("GET / HTTP/1.1\r"));
        assertThrows(EOFException.class,
                () -> parse("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"));
    }

    @Test
    void writesAResponseWithLengthAndOptionalClose() throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        Http1.writeResponse(out, 405, "{\"error\":\"é\"}".getBytes(StandardCharsets.UTF_8), true,
                Map.of("Allow", "POST"));
        assertEquals("HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/json\r\n"
                + "Content-Length: 14\r\nAllow: POST\r\nConnection: close\r\n\r\n{\"error\":\"é\"}",
                out.toString(StandardCharsets.UTF_8));

        out.reset();
        Http1.writeResponse(out, 200, new byte[0], false, Map.of());
        assertEquals("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 0"
                + "\r\n\r\n", out.toString(StandardCharsets.US_ASCII));
    }
}

"""Minimal HTTP/1.1 server-side framing: incremental request parsing and response encoding.

http.server costs ~30 ms of imports (email, html, mimetypes, ...) on every cold start;
iceboxd is the only client and speaks plain HTTP/1.1, so this small parser is enough:
Content-Length and chunked bodies, keep-alive, pipelining and `Expect: 100-continue`.
"""

MAX_HEAD_BYTES = 64 * 1024

REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    505: "HTTP Version Not Supported",
}

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class HttpError(Exception):
    """The byte stream is not valid HTTP/1.x; the connection cannot be reused."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class Request:
    __slots__ = ("method", "path", "query", "headers", "body", "keep_alive")

    def __init__(self, method, path, query, headers, body, keep_alive):
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive

    def query_param(self, name):
        for pair in self.query.split("&"):
            key, _, value = pair.partition("=")
            if key == name:
                return value
        return None


class _Head:
    __slots__ = ("method", "path", "query", "headers", "keep_alive", "length", "chunked", "expect_continue")


class RequestParser:
    """Feed raw bytes in, take complete requests out (in order, supports pipelining)."""

    def __init__(self):
        self._buf = bytearray()
        self._head = None
        self._body = None  # bytearray while decoding a chunked body
        self._chunk_left = None  # bytes still expected in the current chunk (+2 for CRLF)
        self._in_trailers = False
        self._continue_sent = False

    def feed(self, data):
        self._buf += data

    def take_continue(self):
        """True once per request that asked for `100 Continue` and still waits for its body."""
        head = self._head
        if head is None or not head.expect_continue or self._continue_sent:
            return False
        self._continue_sent = True
        return True

    def next_request(self):
        """Return the next complete Request, or None if more bytes are needed."""
        if self._head is None:
            head = self._parse_head()
            if head is None:
                return None
            self._head = head
            self._continue_sent = False
        head = self._head
        if head.chunked:
            body = self._parse_chunked()
        else:
            body = self._take_fixed(head.length)
        if body is None:
            return None
        self._head = None
        return Request(head.method, head.path, head.query, head.headers, body, head.keep_alive)

    def _take_fixed(self, length):
        buf = self._buf
        if len(buf) < length:
            return None
        if len(buf) == length:
            body = bytes(buf)
            buf.clear()
        else:
            body = bytes(buf[:length])
            del buf[:length]
        return body

    def _parse_chunked(self):
        buf = self._buf
        if self._body is None:
            self._body = bytearray()
        while True:
            if self._in_trailers:
                end = buf.find(b"\r\n")
                if end < 0:
                    self._check_line_length()
                    return None
                del buf[: end + 2]
                if end == 0:
                    body = bytes(self._body)
                    self._body = None
                    self._in_trailers = False
                    return body
                continue
            if self._chunk_left is None:
                end = buf.find(b"\r\n")
                if end < 0:
                    self._check_line_length()
                    return None
                size_text = bytes(buf[:end]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise HttpError(400, "invalid chunk size") from None
                if size < 0:
                    raise HttpError(400, "invalid chunk size")
                del buf[: end + 2]
                if size == 0:
                    self._in_trailers = True
                    continue
                self._chunk_left = size + 2
            if len(buf) < self._chunk_left:
                return None
            data_end = self._chunk_left - 2
            if buf[data_end : data_end + 2] != b"\r\n":
                raise HttpError(400, "chunk data not terminated by CRLF")
            self._body += buf[:data_end]
            del buf[: self._chunk_left]
            self._chunk_left = None

    def _check_line_length(self):
        if len(self._buf) > MAX_HEAD_BYTES:
            raise HttpError(400, "chunk framing line too long")

    def _parse_head(self):
        buf = self._buf
        # Tolerate stray CRLFs between pipelined requests (RFC 9112 section 2.2).
        while buf[:2] == b"\r\n":
            del buf[:2]
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise HttpError(431, "request head too large")
            return None
        raw = bytes(buf[:end])
        del buf[: end + 4]
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            raise HttpError(400, "malformed request line")
        method, target, version = parts
        if not version.startswith("HTTP/1."):
            raise HttpError(505, "only HTTP/1.x is supported")
        headers = {}
        for line in lines[1:]:
            if not line or line[0] in " \t":
                raise HttpError(400, "malformed header line")
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise HttpError(400, "malformed header line")
            name = name.lower()
            value = value.strip(" \t")
            if name in headers:
                if name == "content-length" and headers[name] != value:
                    raise HttpError(400, "conflicting Content-Length headers")
                headers[name] = headers[name] + ", " + value
            else:
                headers[name] = value

        head = _Head()
        head.method = method
        if target.startswith(("http://", "https://")):
            slash = target.find("/", target.index("//") + 2)
            target = target[slash:] if slash >= 0 else "/"
        path, _, query = target.partition("?")
        head.path = path
        head.query = query
        head.headers = headers
        connection = [t.strip().lower() for t in headers.get("connection", "").split(",")]
        if version == "HTTP/1.0":
            head.keep_alive = "keep-alive" in connection
        else:
            head.keep_alive = "close" not in connection
        head.chunked = False
        head.length = 0
        encoding = headers.get("transfer-encoding")
        if encoding is not None:
            if encoding.strip().lower() != "chunked":
                raise HttpError(400, "unsupported Transfer-Encoding: " + encoding)
            head.chunked = True
        elif "content-length" in headers:
            value = headers["content-length"].split(",")[0].strip()
            if not value.isdigit():
                raise HttpError(400, "invalid Content-Length")
            head.length = int(value)
        head.expect_continue = headers.get("expect", "").lower() == "100-continue"
        return head


def encode_response(status, body, keep_alive, extra_headers=None):
    """Serialize a JSON response; `body` is bytes already encoded by the caller."""
    head = "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" % (
        status,
        REASONS.get(status, "Unknown"),
        len(body),
    )
    if extra_headers:
        for name, value in extra_headers:
            head += "%s: %s\r\n" % (name, value)
    if not keep_alive:
        head += "Connection: close\r\n"
    return (head + "\r\n").encode("latin-1") + body

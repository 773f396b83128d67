"""HTTP/1.1 framing on the raw socket: keep-alive, pipelining, chunked bodies, bad framing."""

import json
import socket

HELLO = "def main(args):\n    return {'n': args.get('n')}\n"


def _connect(proxy):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(proxy.socket_path)
    return sock


def _read_responses(sock, count):
    """Parse `count` Content-Length framed responses; returns [(status, headers, body)]."""
    data = b""
    responses = []
    while len(responses) < count:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            lines = data[:head_end].decode("latin-1").split("\r\n")
            headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            length = int(headers["content-length"])
            end = head_end + 4 + length
            if len(data) >= end:
                responses.append((int(lines[0].split()[1]), headers, json.loads(data[head_end + 4 : end])))
                data = data[end:]
                continue
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("connection closed after %d responses" % len(responses))
        data += chunk
    return responses


def _post(path, body, extra=""):
    data = json.dumps(body).encode()
    return ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n" % (path, len(data), extra)).encode() + data


def test_pipelined_requests_on_one_connection(proxy):
    assert proxy.init(HELLO).status == 200
    with _connect(proxy) as sock:
        sock.sendall(b"".join(_post("/run", {"value": {"n": i}}) for i in range(3)))
        responses = _read_responses(sock, 3)
    assert [body for _, _, body in responses] == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_chunked_request_body(proxy):
    assert proxy.init(HELLO).status == 200
    body = json.dumps({"value": {"n": "chunked"}}).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:5], body[5:]))
    with _connect(proxy) as sock:
        sock.sendall(b"POST /run HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        sock.sendall(chunks + b"0\r\n\r\n")
        [(status, _, payload)] = _read_responses(sock, 1)
    assert status == 200
    assert payload == {"n": "chunked"}


def test_expect_continue(proxy):
    body = json.dumps({"value": {"code": HELLO}}).encode()
    with _connect(proxy) as sock:
        sock.sendall(
            b"POST /init HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        interim = b""
        while b"\r\n\r\n" not in interim:
            interim += sock.recv(1)
        assert interim.startswith(b"HTTP/1.1 100 ")
        sock.sendall(body)
        [(status, _, payload)] = _read_responses(sock, 1)
    assert status == 200
    assert payload == {"ok": True}


def test_connection_close_is_honoured(proxy):
    with _connect(proxy) as sock:
        sock.sendall(b"GET /icebox/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        [(status, headers, _)] = _read_responses(sock, 1)
        assert status == 200
        assert headers["connection"] == "close"
        assert sock.recv(1) == b""


def test_bad_framing_gives_400_and_closes_only_that_connection(proxy):
    with _connect(proxy) as sock:
        sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        [(status, _, payload)] = _read_responses(sock, 1)
        assert status == 400
        assert "error" in payload
        assert sock.recv(1) == b""
    with _connect(proxy) as sock:
        sock.sendall(b"POST /run HTTP/1.1\r\nContent-Length: nope\r\n\r\n")
        [(status, _, _)] = _read_responses(sock, 1)
        assert status == 400
    assert proxy.request("GET", "/icebox/stats").status == 200


def test_client_disconnect_mid_request_does_not_stop_proxy(proxy):
    with _connect(proxy) as sock:
        sock.sendall(b'POST /init HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{"value"')
    assert proxy.init(HELLO).status == 200
    assert proxy.run({"n": 5}).json == {"n": 5}

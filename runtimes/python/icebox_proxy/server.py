"""Connection handling on the listening UNIX socket.

Concurrency 1: a single thread polls every open connection and serves complete requests one
at a time. Polling (rather than serving one connection until it closes) matters because
iceboxd may hold an idle keep-alive connection while opening another one.
Concurrency > 1: one thread per connection, so overlapping /run requests really overlap.
"""

import _socket
import select

from . import activation
from .httpwire import CONTINUE, HttpError, RequestParser, encode_response

_RECV_SIZE = 256 * 1024


class Connection:
    __slots__ = ("sock", "parser")

    def __init__(self, sock):
        self.sock = sock
        self.parser = RequestParser()

    def on_readable(self, app):
        """Read what arrived and answer every complete request; False once the peer is done."""
        data = self.sock.recv(_RECV_SIZE)
        if not data:
            return False
        parser = self.parser
        parser.feed(data)
        del data
        while True:
            try:
                request = parser.next_request()
            except HttpError as exc:
                self.sock.sendall(encode_response(exc.status, activation.error_body(exc.message), keep_alive=False))
                return False
            if request is None:
                if parser.take_continue():
                    self.sock.sendall(CONTINUE)
                return True
            status, body, headers = app.handle(request)
            self.sock.sendall(encode_response(status, body, request.keep_alive, headers))
            if not request.keep_alive:
                return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def _accept(listener):
    fd, _address = listener._accept()
    return Connection(_socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, fd))


def serve_single(listener, app):
    poller = select.poll()
    listen_fd = listener.fileno()
    poller.register(listen_fd, select.POLLIN)
    connections = {}
    while True:
        for fd, _events in poller.poll():
            if fd == listen_fd:
                try:
                    connection = _accept(listener)
                except OSError:  # peer gave up before accept, or out of descriptors
                    continue
                connections[connection.sock.fileno()] = connection
                poller.register(connection.sock, select.POLLIN)
                continue
            connection = connections.get(fd)
            if connection is None:
                continue
            try:
                keep = connection.on_readable(app)
            except OSError:  # reset or broken pipe: iceboxd dropped the connection
                keep = False
            if not keep:
                poller.unregister(fd)
                del connections[fd]
                connection.close()


def serve_threaded(listener, app):
    import threading

    while True:
        try:
            connection = _accept(listener)
        except OSError:
            continue
        threading.Thread(
            target=_serve_connection, args=(connection, app), name="icebox-connection", daemon=True
        ).start()


def _serve_connection(connection, app):
    try:
        while connection.on_readable(app):
            pass
    except OSError:
        pass
    finally:
        connection.close()

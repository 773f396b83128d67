"""Start-up: read the launch environment, listen on the UNIX socket, serve until SIGTERM.

Readiness is "a connect() succeeds", which the kernel grants as soon as listen() returns.
Everything not needed to get there -- `os` (~1 ms: it builds os.environ and imports
collections.abc), request handling, JSON -- is imported after listen(), overlapping with
iceboxd connecting and sending /init. Until then only builtin modules (posix, _socket) are
used, and paths stay bytes as the environment gives them.
"""

import _socket
import posix
import sys

from . import gctimer, shutdown

_LISTEN_BACKLOG = 128
_FLAG_VALUES = {"": False, "0": False, "false": False, "1": True, "true": True}
_SHARING_MODES = ("process", "shared")


class FatalError(Exception):
    pass


def _text(raw):
    return raw.decode("utf-8", "surrogateescape")


def _read_config():
    path = posix.environ.get(b"ICEBOX_PROXY_SOCKET")
    if not path:
        raise FatalError("ICEBOX_PROXY_SOCKET is not set")
    raw = _text(posix.environ.get(b"ICEBOX_CONCURRENCY", b"")).strip() or "1"
    try:
        concurrency = int(raw)
    except ValueError:
        concurrency = 0
    if concurrency < 1:
        raise FatalError("ICEBOX_CONCURRENCY must be a positive integer, got %r" % raw)
    raw = _text(posix.environ.get(b"ICEBOX_EAGER_GC", b""))
    eager_gc = _FLAG_VALUES.get(raw.strip().lower())
    if eager_gc is None:
        # A typo must not silently measure the wrong baseline.
        raise FatalError("ICEBOX_EAGER_GC must be 1 or 0, got %r" % raw)
    sharing = _sharing(_text(posix.environ.get(b"ICEBOX_SHARING", b"")))
    return path, concurrency, eager_gc, sharing


def _sharing(raw):
    """ICEBOX_SHARING: absent or empty is the process mode."""
    mode = raw or "process"
    if mode in _SHARING_MODES:
        return mode
    if mode == "isolate":
        # The daemon refuses the annotation for python kinds first; this is the backstop.
        raise FatalError(
            "ICEBOX_SHARING=isolate is not supported by the Python runtime"
            " (isolates are for nodejs kinds only); use process or shared"
        )
    raise FatalError("ICEBOX_SHARING must be process, shared or isolate, got %r" % raw)


def _listen(path):
    try:
        posix.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise FatalError("cannot remove stale %s: %s" % (_text(path), exc)) from None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(_LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise FatalError("cannot listen on %s: %s" % (_text(path), exc)) from None
    return sock


def _cleanup(listener, path, inode, app):
    listener.close()
    try:
        # Only our own socket: a replacement proxy may already have bound the same path.
        if posix.stat(path).st_ino == inode:
            posix.unlink(path)
    except OSError:
        pass
    action = app.action if app is not None else None
    if action is not None and action.directory:
        from .loader import remove_tree

        remove_tree(action.directory)


def main():
    try:
        path, concurrency, eager_gc, sharing = _read_config()
        shutdown.install()
        listener = _listen(path)
        inode = posix.stat(path).st_ino
    except FatalError as exc:
        sys.stderr.write("icebox python proxy: fatal: %s\n" % exc)
        return 1
    app = None
    try:
        gctimer.install()
        from . import server
        from .app import App

        app = App(concurrency, eager_gc, sharing)
        if concurrency == 1:
            server.serve_single(listener, app)
        else:
            server.serve_threaded(listener, app)
    except (shutdown.Terminate, KeyboardInterrupt):
        pass
    finally:
        _cleanup(listener, path, inode, app)
    return 0

"""Request routing and the OpenWhisk /init and /run semantics (see docs/runtime-protocol.md)."""

import _thread
import contextlib
import gc

# reclaim is imported now, not on the first reclaim: see its docstring (arena pinning).
from . import activation, jsoncodec, reclaim, slots
from .shutdown import Terminate

ALREADY_INITIALIZED = "Internal error. Cannot initialize the action more than once."
NOT_INITIALIZED = "Cannot invoke an uninitialized action."
NOT_INITIALIZED_RESTORE = "Cannot restore an uninitialized action: /icebox/restored needs a successful /init first."

_OK = b'{"ok": true}'


class _BadRequest(Exception):
    pass


@contextlib.contextmanager
def _bad_metadata():
    """Malformed activation metadata in a /run body is the client's error (400)."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise _BadRequest("Invalid activation metadata: %s" % exc) from None


class _NoLimit:
    """Concurrency 1 needs no semaphore (one thread); contextlib would cost an import."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NO_LIMIT = _NoLimit()


def _error(status, message):
    return status, activation.error_body(message), None


def _parse_object(body):
    try:
        document = jsoncodec.loads(body)
    except (ValueError, RecursionError) as exc:
        raise _BadRequest("Malformed JSON body: %s" % exc) from None
    if not isinstance(document, dict):
        raise _BadRequest("The request body must be a JSON object.")
    return document


class App:
    def __init__(self, concurrency, eager_gc=False, sharing="process"):
        self.action = None
        self._sharing = sharing
        self._slots = slots.Slots(concurrency)
        # Before any user code runs, so that `from os import environ` gets the per-thread view.
        self._environ = activation.install_thread_env() if sharing == "shared" else None
        # Desiccant's "eager" baseline: a full collection after every activation, inside the
        # runtime, counted in the activation's latency.
        self._eager_gc = eager_gc
        self._init_lock = _thread.allocate_lock()
        if concurrency > 1:
            import threading

            self._run_slots = threading.BoundedSemaphore(concurrency)
        else:
            self._run_slots = _NO_LIMIT
        self._routes = {
            "/init": {"POST": self._init},
            "/run": {"POST": self._run},
            "/icebox/stats": {"GET": self._stats},
            "/icebox/reclaim": {"POST": self._reclaim},
            "/icebox/restored": {"POST": self._restored},
        }

    def handle(self, request):
        """Return (status, body bytes, extra headers or None) for one request."""
        methods = self._routes.get(request.path)
        if methods is None:
            return _error(404, "Unknown path: %s" % request.path)
        handler = methods.get(request.method)
        if handler is None:
            status, body, _ = _error(405, "Method %s is not allowed on %s." % (request.method, request.path))
            return status, body, (("Allow", ", ".join(methods)),)
        try:
            return handler(request)
        except _BadRequest as exc:
            return _error(400, str(exc))
        except (Terminate, KeyboardInterrupt):
            raise
        except Exception as exc:
            return _error(500, "Internal error in the Python action proxy: %s" % activation.describe_exception(exc))

    def _init(self, request):
        if self.action is not None:
            return _error(403, ALREADY_INITIALIZED)
        value = _parse_object(request.body).get("value")
        if not isinstance(value, dict):
            raise _BadRequest("The /init body must have a 'value' object.")
        from . import loader

        with self._init_lock:
            if self.action is not None:
                return _error(403, ALREADY_INITIALIZED)
            try:
                self.action = loader.load(value)
            except loader.LoadError as exc:
                return _error(502, str(exc))
        return 200, _OK, None

    def _run(self, request):
        try:
            status, body = self._activate(request)
            if self._eager_gc:
                # Before the sentinels: output of finalizers it runs belongs to this activation.
                gc.collect()
        finally:
            # Before the response leaves: once iceboxd has the result, the logs are complete.
            activation.write_sentinels()
        return status, body, None

    def _activate(self, request):
        action = self.action
        if action is None:
            return 403, activation.error_body(NOT_INITIALIZED)
        document = _parse_object(request.body)
        params = document.get("value")
        if params is None:
            params = {}
        elif not isinstance(params, dict):
            raise _BadRequest("The /run 'value' must be a JSON object.")
        if self._environ is not None:
            with _bad_metadata():
                values = activation.activation_env(document)
            with self._run_slots:
                # Inside the slot: values set earlier would be in place while waiting for one.
                self._environ.set_for_this_thread(values)
                try:
                    return self._call(action, params)
                finally:
                    self._environ.clear_for_this_thread()
        with _bad_metadata():
            activation.set_activation_env(document)
        with self._run_slots:
            return self._call(action, params)

    def _call(self, action, params):
        self._slots.acquire()
        try:
            return activation.call(action.entry, params)
        finally:
            self._slots.release()

    def _stats(self, request):
        from . import heapstats

        full_gc = request.query_param("gc") in ("1", "true")
        stats = heapstats.collect(full_gc)
        stats["sharing"] = self._sharing_stats()
        return 200, jsoncodec.dumps(stats), None

    def _sharing_stats(self):
        """The protocol's `sharing` object; contexts (thread slots) in the shared mode only."""
        sharing = {"mode": self._sharing, "capacity": self._slots.capacity, "in_flight": self._slots.in_flight}
        if self._sharing == "shared":
            sharing["contexts"] = self._slots.contexts()
        return sharing

    def _reclaim(self, request):
        # No sentinels: this is not an activation and writes nothing to the action's logs.
        variant = None
        if request.body.strip():
            variant = _parse_object(request.body).get("variant")
        try:
            return 200, jsoncodec.dumps(reclaim.reclaim(variant)), None
        except reclaim.UnknownVariant:
            try:
                shown = jsoncodec.dumps(variant).decode("utf-8")
            except (TypeError, ValueError):  # NaN/Infinity parse but do not serialize
                shown = repr(variant)
            message = "Unknown reclaim variant %s; variants: %s (default %s)." % (
                shown,
                ", ".join(reclaim.VARIANTS),
                reclaim.DEFAULT_VARIANT,
            )
            return (
                400,
                jsoncodec.dumps(
                    {"error": message, "variants": list(reclaim.VARIANTS), "default": reclaim.DEFAULT_VARIANT}
                ),
                None,
            )

    def _restored(self, request):
        # No sentinels, as after /init: output of the hook joins the first activation's log.
        action = self.action
        if action is None:
            return _error(403, NOT_INITIALIZED_RESTORE)
        from . import restore

        try:
            document = _parse_object(request.body)
            # Both checked before anything changes: a bad body applies nothing.
            seed = restore.parse_seed(document)
            env = restore.parse_env(document)
        except restore.BadRequest as exc:
            raise _BadRequest(str(exc)) from None
        # Two overlapping calls must not interleave reseeding and hooks (threaded server).
        with self._init_lock:
            # The environment first, so the hook already sees the new instance's values.
            applied = restore.apply_env(env)
            reseeded = restore.reseed(seed)
            try:
                hook = restore.call_hook(action.module)
            except restore.HookFailed as exc:
                return _error(502, str(exc))
        return 200, jsoncodec.dumps({"ok": True, "reseeded": reseeded, "hook": hook, "env": applied}), None

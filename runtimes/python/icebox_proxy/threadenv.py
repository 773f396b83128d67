"""os.environ with the current thread's activation values laid over it (shared mode).

In the shared mode overlapping activations run on threads of one interpreter, so the
process-wide environment cannot hold each one's __OW_* values. `install()` replaces
`os.environ` (what `os.getenv` and `os.environ[...]` read) with a mapping that answers the
names an activation set from that activation's own values on its own thread. Everything
else (and every name on a thread without activation values: the proxy's, or one the action
started) is the process environment, shared as before. Limits: `os.environb`, `posix.environ`
and child processes (which inherit the C environment) see only the process environment; an
action that starts a subprocess and wants it to see its values passes `env=dict(os.environ)`.
"""

import os
import threading


class ActivationEnviron(os._Environ):
    def __init__(self, base):
        # The same underlying dict: process-wide writes stay visible through both objects.
        super().__init__(base._data, base.encodekey, base.decodekey, base.encodevalue, base.decodevalue)
        self._local = threading.local()

    def set_for_this_thread(self, values):
        """values: name -> str, or None for a name this activation has unset; kept as given
        (the caller builds a fresh dict per activation)."""
        self._local.values = values

    def clear_for_this_thread(self):
        self._local.values = None

    def _own(self):
        return getattr(self._local, "values", None)

    def __getitem__(self, key):
        own = self._own()
        if own is not None and key in own:
            value = own[key]
            if value is None:
                raise KeyError(key)
            return value
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        own = self._own()
        if own is not None and key in own:
            self.encodevalue(value)  # the same type check as a real environment write
            own[key] = value
            return
        super().__setitem__(key, value)

    def __delitem__(self, key):
        own = self._own()
        if own is not None and key in own:
            if own[key] is None:
                raise KeyError(key)
            own[key] = None
            return
        super().__delitem__(key)

    def __iter__(self):
        own = self._own()
        if own is None:
            yield from super().__iter__()
            return
        for key in super().__iter__():
            if key not in own:
                yield key
        for key, value in own.items():
            if value is not None:
                yield key

    def __len__(self):
        if self._own() is None:
            return super().__len__()
        return sum(1 for _ in self)


def install():
    """Replace os.environ (idempotent); returns the ActivationEnviron now in place."""
    if not isinstance(os.environ, ActivationEnviron):
        # B003 warns that rebinding os.environ does not clear the environment; the wrapper is meant to
        # keep it and put the activation's variables in front.
        os.environ = ActivationEnviron(os.environ)  # noqa: B003
    return os.environ

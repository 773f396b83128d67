"""POST /icebox/restored: make an instance restored from a snapshot stop sharing random state.

Every instance restored from one snapshot starts with the same memory, so any generator that
was seeded before the snapshot would produce the same numbers in all of them. iceboxd sends a
fresh seed; this module reseeds what the interpreter holds process-wide and then calls the
action's own hook, `icebox_restored()`, for whatever the action keeps itself. The same memory
also holds the template's environment: iceboxd sends the new instance's values of the
variables that may differ (`env`, e.g. `__OW_API_HOST`), applied first so the hook sees them.

Only generators that already exist are touched: a module the action imports after the
restore seeds itself from os.urandom then, which is already different per instance, and
importing one here just to reseed it would put its import on the restore path.
"""

import os
import sys

from . import activation
from .shutdown import Terminate

HOOK_NAME = "icebox_restored"
SEED_HEX_DIGITS = 64
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class BadRequest(ValueError):
    pass


class HookFailed(Exception):
    pass


def parse_seed(document):
    """The 32 seed bytes of a /icebox/restored body (a dict); BadRequest says what is wrong."""
    instance = document.get("instance")
    if not isinstance(instance, str) or not instance:
        raise BadRequest('The /icebox/restored body needs "instance": the new instance\'s id as a non-empty string.')
    seed = document.get("seed")
    if not isinstance(seed, str) or len(seed) != SEED_HEX_DIGITS or not _HEX_DIGITS.issuperset(seed):
        shown = seed if isinstance(seed, str) and len(seed) <= 80 else type(seed).__name__
        raise BadRequest(
            'The /icebox/restored "seed" must be %d hex digits (32 bytes), got %r.' % (SEED_HEX_DIGITS, shown)
        )
    return bytes.fromhex(seed)


def parse_env(document):
    """{name: value} of the body's optional "env" (empty when absent); BadRequest for anything
    that is not an object of environment-variable names to strings, so that nothing is applied
    when any of it is wrong."""
    if "env" not in document:
        return {}
    env = document["env"]
    if not isinstance(env, dict):
        raise BadRequest(
            'The /icebox/restored "env" must be an object of environment'
            " variable names to string values, got %s." % _json_type(env)
        )
    for name, value in env.items():
        # What os.environ would refuse half-way through, checked before anything is set.
        if not name or "=" in name or "\0" in name:
            raise BadRequest(
                "The /icebox/restored \"env\" has an invalid variable name %r (empty, or with '=' or a NUL)." % name
            )
        if not isinstance(value, str):
            raise BadRequest(
                'The /icebox/restored "env" value of %s must be a string, got %s.' % (name, _json_type(value))
            )
        if "\0" in value:
            raise BadRequest('The /icebox/restored "env" value of %s contains a NUL character.' % name)
    return env


def _json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def apply_env(env):
    """Set the variables process-wide; returns their names, sorted, for the reply.

    Through os.environ, which also calls putenv (child processes inherit the new values). In
    the shared mode os.environ is threadenv's view: this request's thread has no activation
    values, so the write lands in the process environment that every activation falls back to
    for names it does not hold itself (all but the seven __OW_* set per /run).
    """
    for name, value in env.items():
        os.environ[name] = value
    return sorted(env)


def reseed(seed):
    """Reseed the process-wide generators in use; returns their names for the reply."""
    reseeded = []
    random_module = sys.modules.get("random")
    if random_module is not None:
        # Also what `from random import randint` etc. call: the bound methods of this instance.
        random_module.seed(int.from_bytes(seed, "big"))
        reseeded.append("random")
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None and getattr(tempfile, "_name_sequence", None) is not None:
        # Its generator re-seeds itself only when the pid changes, and a restored process keeps
        # the template's pid: dropping it makes the next temporary name start a new one.
        tempfile._name_sequence = None
        reseeded.append("tempfile")
    ssl = sys.modules.get("_ssl")
    if ssl is not None:
        # OpenSSL's generator notices a fork by its pid, which a restore keeps too. RAND_add
        # reseeds its primary generator (with fresh OS entropy besides these bytes), which
        # makes the per-thread generators behind TLS and ssl.RAND_bytes reseed on their next use.
        ssl.RAND_add(seed, float(len(seed)))
        reseeded.append("openssl")
    return reseeded


def call_hook(module):
    """Call the action's `icebox_restored()` if it defines one; True if it was called."""
    hook = getattr(module, HOOK_NAME, None)
    if hook is None:
        return False
    if not callable(hook):
        raise HookFailed("The action's '%s' is not a function (it is a %s)." % (HOOK_NAME, type(hook).__name__))
    try:
        hook()
    except (Terminate, KeyboardInterrupt):
        raise
    except BaseException as exc:  # SystemExit from user code must not stop the proxy
        activation.print_traceback(exc)
        raise HookFailed(activation.describe_exception(exc)) from None
    return True

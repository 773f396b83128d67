"""One activation: per-activation environment, the user call, result checks, log sentinel."""

import os
import sys

from . import jsoncodec
from .shutdown import Terminate

SENTINEL = "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n"

# Body keys of POST /run exported to user code as __OW_<KEY> (OpenWhisk convention).
_ACTIVATION_KEYS = (
    "namespace",
    "action_name",
    "activation_id",
    "transaction_id",
    "api_key",
    "deadline",
    "action_version",
)

NOT_A_DICT = "The action did not return a dictionary."

# "main__" is the action's own module (see loader.MODULE_NAME).
_UNQUALIFIED_MODULES = ("builtins", "__main__", "main__")


def activation_env(body):
    """{__OW_<KEY>: value, or None for a key absent from this request} for the metadata."""
    values = {}
    for key in _ACTIVATION_KEYS:
        value = body.get(key)
        if value is not None:
            value = env_value(value)
            if "\0" in value:  # what os.environ refuses in the process mode
                raise ValueError("embedded null byte in %r" % key)
        values["__OW_" + key.upper()] = value
    return values


def set_activation_env(body):
    """Export the activation's metadata process-wide; keys absent from this request are unset."""
    for name, value in activation_env(body).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def install_thread_env():
    """Shared mode: per-thread __OW_* values (see threadenv); returns the new os.environ."""
    from . import threadenv

    return threadenv.install()


def env_value(value):
    """Environment variables are strings; other JSON values are passed as their JSON text."""
    if isinstance(value, str):
        return value
    return jsoncodec.dumps(value).decode("utf-8")


def describe_exception(exc):
    """'<type>: <message>'; the type is module-qualified unless builtin or the action's own."""
    cls = type(exc)
    name = cls.__qualname__
    module = getattr(cls, "__module__", None)
    if module and module not in _UNQUALIFIED_MODULES:
        name = module + "." + name
    try:
        message = str(exc)
    except Exception:  # a broken __str__ must not turn into a proxy failure
        message = ""
    return name + ": " + message if message else name


def call(entry, params):
    """Run the entry point; returns (status, body bytes). Never raises for user failures."""
    try:
        result = entry(params)
    except (Terminate, KeyboardInterrupt):
        raise
    except BaseException as exc:  # SystemExit from user code must not stop the proxy
        print_traceback(exc)
        return 502, error_body(describe_exception(exc))
    if not isinstance(result, dict):
        return 502, error_body(NOT_A_DICT)
    try:
        body = jsoncodec.dumps(result)
    except (TypeError, ValueError, RecursionError) as exc:
        return 502, error_body("The action returned a dictionary that is not valid JSON: %s" % exc)
    # OpenWhisk semantics: a returned {"error": ...} is an application error.
    return (502 if "error" in result else 200), body


def error_body(message):
    return jsoncodec.dumps({"error": message})


def print_traceback(exc):
    # Goes to the activation's log (stderr), before the sentinel.
    try:
        import traceback

        traceback.print_exception(
            type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ is not None else None, file=sys.stderr
        )
    except Exception:
        pass


def write_sentinels():
    """Flush user output, then mark the end of this activation on stdout and stderr."""
    for current, original in ((sys.stdout, sys.__stdout__), (sys.stderr, sys.__stderr__)):
        for stream in (current, original) if current is not original else (original,):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:  # a closed or broken stream must not fail the activation
                pass
        try:
            if original is not None:
                original.write(SENTINEL)
                original.flush()
        except Exception:
            pass

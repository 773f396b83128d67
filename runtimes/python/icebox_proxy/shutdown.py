"""Orderly shutdown on SIGTERM (iceboxd's stop request).

`_signal` rather than `signal`: the latter imports enum, which a cold start cannot afford.
"""

import _signal


class Terminate(BaseException):
    """Raised in the main thread on SIGTERM; never to be swallowed as a user-code failure."""


def _on_sigterm(_signum, _frame):
    raise Terminate()


def install():
    _signal.signal(_signal.SIGTERM, _on_sigterm)

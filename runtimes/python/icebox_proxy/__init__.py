"""icebox action proxy for Python 3 (standard library only).

Kept as a package with a distinctive name so that user modules shipped in an
action zip (``server.py``, ``stats.py``...) can never shadow or be shadowed by
the proxy's own modules.
"""

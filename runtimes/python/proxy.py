"""icebox action proxy for Python 3 actions (OpenWhisk `def main(args)` model).

Launched by iceboxd as `/usr/bin/python3 -S <runtime_dir>/proxy.py` (see runtime.json and
docs/runtime-protocol.md). The code lives in the `icebox_proxy` package next to this file so
that it can be byte-compiled once (scripts never are) and so that its module names cannot
collide with an action's.
"""

import sys


def _run():
    # The interpreter put this script's directory first on sys.path (unless -P/-I).
    script_dir = sys.path[0] if sys.path and not sys.flags.safe_path else None
    runtime_dir = __file__.rpartition("/")[0]
    if not runtime_dir.startswith("/"):  # user code may chdir; imports must not depend on cwd
        import posix

        runtime_dir = posix.getcwd() + ("/" + runtime_dir if runtime_dir else "")
    sys.path.insert(0, runtime_dir)
    from icebox_proxy.main import main

    # Lazily imported submodules are found through icebox_proxy.__path__, so user code
    # does not need to (and should not) see the runtime directory on sys.path.
    sys.path.remove(runtime_dir)
    if script_dir is not None and sys.path and sys.path[0] == script_dir:
        del sys.path[0]
    return main()


if __name__ == "__main__":
    sys.exit(_run())

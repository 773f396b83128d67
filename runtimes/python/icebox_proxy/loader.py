"""POST /init: turn the init payload into a callable entry point.

Source text and zip actions both end up as a directory under the temp dir holding
`__main__.py`, executed as module `main__` (the name OpenWhisk's Python runtime uses), so
tracebacks and `inspect` see real files. A failed load is rolled back (environment,
sys.path, files) so that a corrected /init can follow.
"""

import os
import sys

from . import activation, archive
from .shutdown import Terminate

MODULE_NAME = "main__"
MAIN_FILE = "__main__.py"


class LoadError(Exception):
    pass


class Action:
    __slots__ = ("entry", "directory", "module")

    def __init__(self, entry, directory, module):
        self.entry = entry
        self.directory = directory
        # For /icebox/restored, which looks the action's hook up in it.
        self.module = module


class _Undo:
    """Remembers the process state an init touches, to restore it if loading fails."""

    def __init__(self):
        self._env = {}
        self._path = list(sys.path)
        self.directory = None

    def setenv(self, name, value):
        if name not in self._env:
            self._env[name] = os.environ.get(name)
        os.environ[name] = value

    def rollback(self):
        for name, value in self._env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        sys.path[:] = self._path
        sys.modules.pop(MODULE_NAME, None)
        if self.directory is not None:
            remove_tree(self.directory)


def load(value):
    """Load the action described by the /init `value`; raises LoadError with a clear message."""
    code = value.get("code")
    if not isinstance(code, str) or not code:
        raise LoadError("The /init request has no action code.")
    entry_name = value.get("main") or "main"
    if not isinstance(entry_name, str):
        raise LoadError("'main' must be a string naming the entry function.")
    env = value.get("env") or {}
    if not isinstance(env, dict):
        raise LoadError("'env' must be an object of environment variables.")

    undo = _Undo()
    try:
        for name, env_value in env.items():
            try:
                undo.setenv(name, activation.env_value(env_value))
            except (ValueError, TypeError) as exc:
                raise LoadError("Cannot set environment variable %r: %s" % (name, exc)) from None
        _enable_site()
        # User modules would otherwise litter the small /tmp tmpfs with __pycache__ dirs.
        sys.dont_write_bytecode = True
        undo.directory = _make_action_dir()
        if value.get("binary"):
            main_path = _unpack_zip(code, undo)
        else:
            main_path = os.path.join(undo.directory, MAIN_FILE)
            with open(main_path, "w", encoding="utf-8", errors="surrogatepass") as out:
                out.write(code)
        del code, value
        module = _execute(main_path)
        entry = getattr(module, entry_name, None)
        if entry is None:
            raise LoadError("The action has no function named '%s'." % entry_name)
        if not callable(entry):
            raise LoadError("The action's '%s' is not a function (it is a %s)." % (entry_name, type(entry).__name__))
        return Action(entry, undo.directory, module)
    except BaseException:
        undo.rollback()
        raise


def _enable_site():
    # The proxy starts with -S to keep cold start short; user code gets the usual
    # site-packages (Debian dist-packages, .pth files) once it is actually loaded.
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()


def _make_action_dir():
    base = os.environ.get("TMPDIR") or "/tmp"
    for _ in range(100):
        path = os.path.join(base, "icebox-python-action-" + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            raise LoadError("Cannot create the action directory %s: %s" % (path, exc)) from None
    raise LoadError("Cannot create a unique action directory under %s." % base)


def _unpack_zip(code, undo):
    directory = undo.directory
    try:
        archive.extract_zip(archive.decode_base64(code), directory)
    except archive.ArchiveError as exc:
        raise LoadError(str(exc)) from None
    main_path = os.path.join(directory, MAIN_FILE)
    if not os.path.isfile(main_path):
        raise LoadError("The action zip has no %s at its top level." % MAIN_FILE)
    venv, site_dirs = archive.virtualenv_site_dirs(directory)
    if venv is not None:
        if not site_dirs:
            raise LoadError("The action zip's virtualenv/ has no lib/python3.*/site-packages.")
        _prepend_site_dirs(site_dirs)
        # What virtualenv's activate_this.py (used by OpenWhisk) also does.
        undo.setenv("VIRTUAL_ENV", venv)
        undo.setenv("PATH", os.path.join(venv, "bin") + os.pathsep + os.environ.get("PATH", ""))
    sys.path.insert(0, directory)
    return main_path


def _prepend_site_dirs(site_dirs):
    import site

    before = list(sys.path)
    for path in reversed(site_dirs):
        site.addsitedir(path)
    added = [p for p in sys.path if p not in before]
    sys.path[:] = added + before


def _execute(main_path):
    module = type(sys)(MODULE_NAME)
    module.__file__ = main_path
    try:
        with open(main_path, "rb") as source_file:
            source = source_file.read()
        code = compile(source, main_path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise LoadError("Cannot load the action: %s: %s" % (type(exc).__name__, exc)) from None
    except (OSError, ValueError) as exc:
        raise LoadError("Cannot read the action's %s: %s" % (MAIN_FILE, exc)) from None
    sys.modules[MODULE_NAME] = module
    try:
        exec(code, module.__dict__)
    except (Terminate, KeyboardInterrupt):
        raise
    except BaseException as exc:
        raise LoadError("Cannot load the action: %s%s" % (activation.describe_exception(exc), _where(exc))) from None
    return module


def _where(exc):
    """' (at file, line N)' for the innermost frame, to locate load-time failures."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    return " (at %s, line %d)" % (os.path.basename(tb.tb_frame.f_code.co_filename), tb.tb_lineno)


def remove_tree(path):
    import shutil

    shutil.rmtree(path, ignore_errors=True)

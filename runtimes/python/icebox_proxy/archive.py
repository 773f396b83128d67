"""Zip actions: validate and extract the archive, locate its virtualenv (OpenWhisk layout)."""

import binascii
import os
import sys


class ArchiveError(Exception):
    pass


def decode_base64(code):
    try:
        return binascii.a2b_base64(code)
    except (binascii.Error, ValueError) as exc:
        raise ArchiveError("The action code is not valid base64: %s" % exc) from None


def _unsafe_reason(name):
    normalized = name.replace("\\", "/")
    if normalized.startswith("/"):
        return "absolute path"
    if len(normalized) >= 2 and normalized[1] == ":":
        return "drive-qualified path"
    if ".." in normalized.split("/"):
        return "parent-directory ('..') component"
    if "\x00" in normalized:
        return "NUL byte in name"
    return None


def extract_zip(data, target_dir):
    """Extract the zip bytes into target_dir after checking every entry name."""
    import io
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            for member in members:
                reason = _unsafe_reason(member.filename)
                if reason is not None:
                    raise ArchiveError("The action zip contains an unsafe entry %r (%s)." % (member.filename, reason))
            archive.extractall(target_dir, members)
    except ArchiveError:
        raise
    except zipfile.BadZipFile as exc:
        raise ArchiveError("The action code is not a valid zip file: %s" % exc) from None
    except (OSError, RuntimeError, ValueError, EOFError, NotImplementedError) as exc:
        # Encrypted entries, unsupported compression, tmpfs full, truncated data...
        raise ArchiveError("Cannot extract the action zip: %s" % exc) from None


def virtualenv_site_dirs(action_dir):
    """site-packages of the zip's `virtualenv/` dir, this interpreter's version first."""
    venv = os.path.join(action_dir, "virtualenv")
    if not os.path.isdir(venv):
        return None, []
    found = []
    lib = os.path.join(venv, "lib")
    if os.path.isdir(lib):
        for entry in sorted(os.listdir(lib)):
            candidate = os.path.join(lib, entry, "site-packages")
            if entry.startswith("python3") and os.path.isdir(candidate):
                found.append(candidate)
    windows_layout = os.path.join(venv, "Lib", "site-packages")
    if os.path.isdir(windows_layout):
        found.append(windows_layout)
    own = "python%d.%d" % sys.version_info[:2]
    found.sort(key=lambda path: os.path.basename(os.path.dirname(path)) != own)
    return venv, found

"""JSON encoding/decoding through the `_json` C accelerator, without importing `json`.

`import json` pulls in `re` (and with it enum, collections, functools, the regex compiler)
which costs ~4 ms and ~1 MiB of private memory in every idle instance. The C scanner and
encoder that `json` itself uses are reachable directly; the pure `json` module is only
imported to produce a precise error message for input the fast path rejects, or when `_json`
is unavailable.
"""

_JSON_SPACE = " \t\n\r"


class _ScannerContext:
    # The attributes _json.make_scanner reads, with json.JSONDecoder's defaults.
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {
        "-Infinity": float("-inf"),
        "Infinity": float("inf"),
        "NaN": float("nan"),
    }.__getitem__
    memo = None


def _not_serializable(obj):
    raise TypeError("Object of type %s is not JSON serializable" % type(obj).__name__)


try:
    import _json

    _scan = _json.make_scanner(_ScannerContext())
    _encode_basestring = _json.encode_basestring
    _encode_basestring_ascii = _json.encode_basestring_ascii
    _make_encoder = _json.make_encoder
except (ImportError, AttributeError, TypeError):  # pragma: no cover - CPython always has _json
    _scan = None


def loads(data):
    """Parse a JSON document from bytes or str; raises ValueError on malformed input."""
    if _scan is not None:
        try:
            text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
            start = len(text) - len(text.lstrip(_JSON_SPACE))
            value, end = _scan(text, start)
            if not text[end:].strip(_JSON_SPACE):
                return value
        except (StopIteration, ValueError, RecursionError, SystemError):
            # SystemError: CPython 3.11's scanner builds its error from json.decoder only if
            # that module is already imported, and otherwise returns NULL with no exception.
            pass
    import json

    # Either the document is malformed (json.loads raises a precise JSONDecodeError) or it
    # uses something the fast path does not handle (UTF-16/32, a BOM).
    return json.loads(data)


def dumps(obj):
    """Serialize to compact UTF-8 JSON bytes; raises TypeError/ValueError like json.dumps."""
    if _scan is None:  # pragma: no cover
        import json

        return json.dumps(obj, allow_nan=False).encode("ascii")
    text = "".join(_encoder(_encode_basestring)(obj, 0))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates have no UTF-8 form; \u-escaping keeps the document valid JSON.
        return "".join(_encoder(_encode_basestring_ascii)(obj, 0)).encode("ascii")


def _encoder(encode_string):
    # allow_nan=False: NaN/Infinity are not JSON and iceboxd's parser would reject them.
    return _make_encoder({}, _not_serializable, encode_string, None, ": ", ", ", False, False, False)

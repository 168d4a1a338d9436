"""JSON text from a peer or a file, decoded totally: a value or `JsonTextError`.

Every reader of untrusted JSON in the project (the JSON-RPC decoder, lock files,
settings, tool texts, the tracer's display) decodes through `loads` here, so that one
place decides what a hostile text may do: whatever its bytes, nesting or numbers, the
caller gets a plain value or a `JsonTextError` (a `ValueError`), never a
`RecursionError` or a `TypeError`.

The rules (PROTOCOL.md §2: the bodies are JSON-RPC over JSON text):

* ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (Python's `json` accepts them);
  a number too large for a float (``1e999``) is refused, since it could not be written
  back as JSON.
* An integer of more than `MAX_INT_DIGITS` digits is refused: turning its digits into
  an `int` takes time that grows with their square (minutes for 16 MiB of them on
  CPython 3.8-3.10; 3.11 refuses such a text by itself, unless its host lifted the
  limit).
* A leading byte-order mark is refused, as ``JSON.parse`` and `json.loads` refuse it.
* Nesting deeper than `MAX_DEPTH` is refused: no message of these protocols is more
  than a dozen levels deep, and a shallow value is safe to print, compare or encode
  again anywhere in a program's stack. (Measured only when the text holds more opening
  brackets than that, and those counted only in a text longer than that, since each
  level needs one: an ordinary message costs a length, or a count.)
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable, List, Union

__all__ = ["JsonTextError", "MAX_DEPTH", "MAX_INT_DIGITS", "depth_exceeds", "json_type", "loads"]

#: The deepest nesting of arrays and objects a decoded value may have.
MAX_DEPTH = 200


class JsonTextError(ValueError):
    """The text is not JSON this project accepts; the message says why."""


def _reject_constant(name: str) -> Any:
    raise ValueError("invalid JSON constant %s" % name)


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (_INF, -_INF):  # "1e999": valid JSON, but not a number we could write back
        raise ValueError("number out of range: %s" % text[:40])
    return value


#: The longest integer a JSON text may hold (CPython 3.11's own limit for `int(text)`).
MAX_INT_DIGITS = 4300


def _parse_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise ValueError("an integer of %d digits (at most %d)" % (len(text), MAX_INT_DIGITS))
    return int(text)


_INF = float("inf")
# One decoder made once: json.loads with these hooks would build a new decoder and
# scanner for every call.
_decoder = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_parse_float, parse_int=_parse_int)


def json_type(value: Any, integers: bool = False) -> str:
    """The JSON name of a decoded value's type, for messages ("a string", "null", ...);
    `integers`: an integer and a number with a fraction told apart. (Never the value
    itself: it may be huge, or deep.)"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return "%r (not a JSON number)" % value  # (a value built in Python: no JSON text holds one)
        if integers:
            return "an integer" if isinstance(value, int) else "a number with a fraction"
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists and dicts more than ``limit`` deep (iterative, so
    any depth is measured without recursion)."""
    stack: List[Any] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def loads(data: Union[bytes, bytearray, memoryview, str], errors: str = "strict") -> Any:
    """Decode one JSON document (UTF-8 bytes or text): the value, or `JsonTextError`.

    ``errors="replace"`` decodes invalid UTF-8 as U+FFFD instead of refusing it (what
    Node's ``readFile(..., "utf8")`` does for lock files)."""
    # The messages are the json module's own (a BOM refused as json.loads refuses it).
    try:
        if isinstance(data, str):
            text = data
        else:  # (bytes decoded as they are; a bytearray or memoryview through bytes)
            text = (data if type(data) is bytes else bytes(data)).decode("utf-8", errors)
        if text.startswith("\ufeff"):
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        value = _decoder.decode(text)
    except (ValueError, TypeError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError: ValueErrors
        raise JsonTextError(str(exc)) from None
    if len(text) > MAX_DEPTH and text.count("[") + text.count("{") > MAX_DEPTH and depth_exceeds(value):
        raise JsonTextError("nested more than %d deep" % MAX_DEPTH)
    return value

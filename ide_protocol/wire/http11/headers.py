"""Header fields: an ordered list of (name, value) pairs with case-insensitive lookups."""
from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union, cast


class Headers:
    """Header fields in arrival order; lookups ignore case, repeats are kept.

    Names keep the case they were sent with (the CLI sends `accept` next to `Host`,
    PROTOCOL.md §2), which matters to a tracer and costs nothing.
    """

    __slots__ = ("raw", "_table", "_table_len")

    def __init__(self, pairs: Union[None, "Headers", Iterable[Tuple[str, str]], Dict[str, str]] = None) -> None:
        if pairs is None:
            self.raw: List[Tuple[str, str]] = []
        elif isinstance(pairs, Headers):
            self.raw = list(pairs.raw)
        elif isinstance(pairs, dict):
            self.raw = [(str(k), str(v)) for k, v in pairs.items()]
        else:
            self.raw = [(str(k), str(v)) for k, v in pairs]
        self._table: Optional[Dict[str, List[str]]] = None  # the index, once built
        self._table_len = 0  # len(raw) when it was built

    @classmethod
    def parsed(cls, fields: List[Tuple[str, str]], index: Dict[str, List[str]]) -> "Headers":
        """Fields as a parser read them, with their lower-cased index already built (a
        parser gives the requests of one repeated head one shared, read-only index;
        `fields` is copied, the index is not)."""
        headers = cls.__new__(cls)
        headers.raw = fields[:]
        headers._table = index
        headers._table_len = len(fields)
        return headers

    def index(self) -> Dict[str, List[str]]:
        """The lower-cased index: name -> values, in order. Read it, never change it (it
        may be shared); change the fields through add/set/remove."""
        # Built at the first lookup (a request's fields are looked up a dozen times) and
        # rebuilt when `raw` changed length.
        table = self._table
        if table is None or self._table_len != len(self.raw):
            table = {}
            for key, value in self.raw:
                table.setdefault(key.lower(), []).append(value)
            self._table = table
            self._table_len = len(self.raw)
        return table

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        table = self._table
        if table is None or self._table_len != len(self.raw):
            table = self.index()
        values = table.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str) -> List[str]:
        return list(self.index().get(name.lower(), ()))

    def tokens(self, name: str) -> List[str]:
        """Comma-separated tokens of every field called `name`, lower-cased."""
        out: List[str] = []
        for value in self.get_all(name):
            out.extend(t.strip().lower() for t in value.split(",") if t.strip())
        return out

    def add(self, name: str, value: str) -> None:
        self.raw.append((name, value))
        self._table = None

    def set(self, name: str, value: str) -> None:
        self.remove(name)
        self.raw.append((name, value))
        self._table = None

    def remove(self, name: str) -> None:
        lname = name.lower()
        self.raw = [(k, v) for k, v in self.raw if k.lower() != lname]
        self._table = None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[Tuple[str, str]]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return list(self.raw) == list(other.raw)  # (NO_TRAILERS holds a tuple)
        return NotImplemented

    def __repr__(self) -> str:
        return "Headers(%r)" % (self.raw,)


class _FrozenHeaders(Headers):
    """Header fields that cannot change: `NO_TRAILERS`, the trailers of every message
    that has none (most of them)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__()
        # A tuple where a list is declared: even `raw.append` fails (the one value is
        # shared by every message without trailers).
        self.raw = cast(List[Tuple[str, str]], ())

    def add(self, name: str, value: str) -> None:
        raise TypeError("these header fields are read-only")

    def set(self, name: str, value: str) -> None:
        raise TypeError("these header fields are read-only")

    def remove(self, name: str) -> None:
        raise TypeError("these header fields are read-only")


NO_TRAILERS: Headers = _FrozenHeaders()

HeadersLike = Union[Headers, Iterable[Tuple[str, str]], Dict[str, str], None]


def pairs_of(headers: HeadersLike) -> List[Tuple[str, str]]:
    """The (name, value) pairs of any of the forms a writer accepts."""
    if headers is None:
        return []
    if isinstance(headers, Headers):
        return list(headers.raw)
    if isinstance(headers, dict):
        return list(headers.items())
    return list(headers)

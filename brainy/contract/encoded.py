"""A document already encoded for the wire, in both encodings (JSON and MessagePack).

An answer may carry an :class:`Encoded` wherever a document stands (a row of a page, say): the codecs
(``brainy/net/codecs.py``) splice its bytes into the answer's encoding instead of encoding a dict again.
The engine makes them for a transport's calls only (``brainy/index/encoded_rows.py``); a call in
process gets plain documents.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import msgpack
import orjson


class Encoded(Mapping):
    """One document's JSON bytes and MessagePack bytes, decoding to the same document.

    Read as a mapping it is that document (decoded at each look, for a reader that peeks inside an
    answer, a test say); the codecs never look, they write its bytes."""

    __slots__ = ("json", "msgpack", "fragment", "hit", "used")

    def __init__(self, json: bytes, msgpack_: bytes) -> None:
        self.json = json
        self.msgpack = msgpack_
        # made once: orjson writes a Fragment's bytes as they are (orjson >= 3.10)
        self.fragment = orjson.Fragment(json)
        # the plain page hit showing this document (brainy/_speedups/pagerows.pyx), made at its first page
        self.hit: Hit | None = None
        # read since the row cache's sweep last passed it (brainy/index/encoded_rows.py, RowCache)
        self.used = False

    @property
    def size(self) -> int:
        """Bytes held, both encodings."""
        return len(self.json) + len(self.msgpack)

    def document(self) -> Any:
        """The document itself (its JSON decoded), for a reader that must look inside."""
        return orjson.loads(self.json)

    def msgpack_document(self) -> Any:
        """The document its MessagePack decodes to (a vector's numbers as exact float32s)."""
        return msgpack.unpackb(self.msgpack, raw=False)

    def __getitem__(self, key: str) -> Any:
        return self.document()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.document())

    def __len__(self) -> int:
        return len(self.document())

    def __repr__(self) -> str:
        return f"Encoded({self.json[:60]!r}{'...' if len(self.json) > 60 else ''})"


class Hit(dict):
    """A plain page's hit, ``{"id", "score": None, "entity"}``, kept with its row version's
    :class:`Encoded` and shared by every page that shows that version: read-only, so no answer can
    change another's. Both encoders write it as the dict it is; ``json_head`` and ``msgpack_head`` are
    its encoding up to the entity's bytes (made with it, by :func:`plain_hit`), so a page of hits is
    written as heads and rows' bytes (brainy/_speedups/pagerows.pyx ``hits_json``, wirepack.pyx)."""

    __slots__ = ("json_head", "msgpack_head")
    json_head: bytes
    msgpack_head: bytes

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a page's hit is shared by every page that shows its row: it is read-only")

    __setitem__ = __delitem__ = __ior__ = _read_only
    setdefault = pop = popitem = clear = update = _read_only


_SCORE_ENTITY = msgpack.packb("score") + msgpack.packb(None) + msgpack.packb("entity")


def plain_hit(id_: Any, entity: Encoded) -> Hit:
    """The read-only hit showing ``entity`` under ``id_``, with its two heads: each is what the plain
    encoder writes for ``{"id": id_, "score": None, "entity": ...}`` before the entity's bytes."""
    hit = Hit(id=id_, score=None, entity=entity)  # dict's own constructor: the read-only methods are not called
    hit.json_head = b'{"id":' + orjson.dumps(id_) + b',"score":null,"entity":'
    hit.msgpack_head = b"\x83" + msgpack.packb("id") + msgpack.packb(id_, use_bin_type=True) + _SCORE_ENTITY
    return hit


class Hits(list):
    """A plain page's results, every one a :class:`Hit` of an :class:`Encoded` row (``plain_hits`` makes
    it so): a list like any other, which the codecs write as its hits' heads and rows' bytes in one join
    instead of a dict and a callback a row."""

    __slots__ = ()

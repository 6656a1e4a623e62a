"""MessagePack of an answer with its encoded pieces spliced in, pure Python: the twin of ``wirepack.pyx``.

An answer may hold :class:`~brainy.contract.encoded.Encoded` rows (their MessagePack bytes written as they
are) and :class:`~brainy.contract.vectors.Vector` s (arrays of float32s, DOORS.md 0.3: 5 bytes a number,
not 9). msgpack packs one float width per call and writes no ready bytes, so each of them is packed as a
placeholder (a bin of the process's random nonce, never written out, so no document can hold it) and
spliced in afterwards: msgpack asks ``default`` in the order it writes, so the placeholders come out in
the order the pieces were taken. Everything else is packed as ``msgpack.packb(use_bin_type=True,
strict_types=True)`` packs it, a subclass of list, tuple or dict as its base.
"""

from __future__ import annotations

import os
from typing import Any

import msgpack

from brainy.contract.encoded import Encoded
from brainy.contract.vectors import Vector

__all__ = ["pack"]

_PLACEHOLDER = os.urandom(16)
_PLACEHOLDER_BIN = b"\xc4\x10" + _PLACEHOLDER  # as msgpack writes it: bin 8, 16 bytes


def pack(document: Any) -> bytes:
    """The MessagePack bytes of ``document``, its encoded rows and vectors spliced in."""
    pieces: list[Encoded | Vector] = []
    placeholder = _PLACEHOLDER

    def default(value: Any) -> Any:
        if type(value) is Encoded or isinstance(value, Vector):
            pieces.append(value)
            return placeholder
        if isinstance(value, (tuple, list)):
            return list(value)
        if isinstance(value, dict):
            return dict(value)
        raise TypeError(f"cannot pack {type(value).__name__}")

    packed = msgpack.packb(document, use_bin_type=True, strict_types=True, default=default)
    if not pieces:
        return packed
    parts = packed.split(_PLACEHOLDER_BIN)
    assert len(parts) == len(pieces) + 1, "a placeholder's bytes turned up elsewhere in the document"
    # interleaved by slice assignment: the parts at the even places, the pieces' bytes at the odd ones
    out: list[bytes] = [b""] * (2 * len(pieces) + 1)
    out[0::2] = parts
    out[1::2] = [piece.msgpack if type(piece) is Encoded else piece.float32_msgpack() for piece in pieces]
    return b"".join(out)

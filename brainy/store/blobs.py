"""Blobs: file content in content-addressed, deduplicated chunks, verified on every read.

The format is docs/store-format.md, "Blobs". Content is cut by content-defined chunking (the
``cdc`` speedup); each chunk and each recipe (the list of a content's chunks) is a record appended
once, by its key, to the last pack file; the pack is fsynced before :meth:`BlobStore.put` returns,
so the commit that then references the content's address never points at bytes that are not
durable. Reads verify the bytes against their address before a byte is answered: ``read`` chunk by
chunk, ``read_all`` into one buffer, ``pieces`` as views a caller turns into text as they come.
``sweep`` collects the records no retained file version and no write in flight reaches
(docs/store-format.md, "The sweep").

A store opened read-only (an attach) never writes or truncates anything; when a key is missing it
reads on from where its index stopped, so it sees records a live writer appended since.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from brainy._speedups import cdc
from brainy.contract import refusals as R
from brainy.store.crc import crc32
from brainy.store.files import fsync_dir

MAGIC = b"brainybl"
VERSION = 1
HEADER_SIZE = 8 + 4 + 4
RECORD_HEADER_SIZE = 1 + 4 + 32 + 4
CHUNK, RECIPE = b"c", b"r"
SEAL_BYTES = 256 << 20
# a sweep's steps are named at DEBUG as they are reached, so a crash test in another process can kill the writer
# between two of them (tests/procs/sweeper.py prints them)
log = logging.getLogger(__name__)
SPAN_BYTES = 1 << 20  # the most a verified read (pieces) preads at once

_header = struct.Struct("<8sII")
_record = struct.Struct("<cI32sI")
_entry = struct.Struct("<I32s")
_count = struct.Struct("<I")
_KINDS = re.compile(b"[cr]")  # where a record may start: its kind byte
PREFIX = "sha256:"

log = logging.getLogger(__name__)


def address(digest: bytes) -> str:
    """The wire form of a content's key: ``sha256:<hex>``."""
    return PREFIX + digest.hex()


def digest_of(text: str) -> bytes:
    """The key an address names; ValueError for anything that is not ``sha256:`` and 64 hex digits."""
    if not text.startswith(PREFIX) or len(text) != len(PREFIX) + 64:
        raise ValueError(f"not a blob address: {text!r}")
    return bytes.fromhex(text[len(PREFIX) :])


def pack_name(number: int) -> str:
    return f"{number:020d}.pack"


def encode_header() -> bytes:
    head = MAGIC + struct.pack("<I", VERSION)
    return head + struct.pack("<I", crc32(head))


def encode_recipe(chunks: list[tuple[int, bytes]]) -> bytes:
    return _count.pack(len(chunks)) + b"".join(_entry.pack(n, key) for n, key in chunks)


def decode_recipe(payload: bytes) -> list[tuple[int, bytes]]:
    (count,) = _count.unpack_from(payload, 0)
    if len(payload) != _count.size + count * _entry.size:
        raise ValueError("recipe length does not match its count")
    return [_entry.unpack_from(payload, _count.size + i * _entry.size) for i in range(count)]


def _whole_record(rest: bytes, at: int) -> bool:
    """Whether a whole record starts at ``rest[at]``: a known kind, its payload inside ``rest``, its crc32 (and a
    chunk's key) its payload's."""
    if at + RECORD_HEADER_SIZE > len(rest) or rest[at : at + 1] not in (CHUNK, RECIPE):
        return False
    kind, length, key, crc = _record.unpack_from(rest, at)
    body = at + RECORD_HEADER_SIZE
    payload = memoryview(rest)[body : body + length]
    if body + length > len(rest) or crc32(payload) != crc:
        return False
    return kind != CHUNK or hashlib.sha256(payload).digest() == key


def _never_landed(f: BinaryIO, offset: int, end: int) -> bool:
    """Whether the bytes of the last pack from ``offset`` to ``end`` are an append the writer was cut short in
    (which no commit references): zeros, or a prefix of one record. A record of an unknown kind, or one whose
    length runs past a record that follows it whole (or past its own payload, whole to the end), is damage:
    taking it for a torn tail would let the writer cut away records committed rows reference."""
    f.seek(offset)
    rest = f.read(end - offset)
    if not rest.strip(b"\0"):
        return True
    if rest[:1] not in (CHUNK, RECIPE):
        return False
    if len(rest) < RECORD_HEADER_SIZE:
        return True
    _, _, _, crc = _record.unpack_from(rest, 0)
    if crc32(memoryview(rest)[RECORD_HEADER_SIZE:]) == crc:
        return False  # its payload is whole: its length is damaged
    return not any(_whole_record(rest, m.start()) for m in _KINDS.finditer(rest, 1))


@dataclass(frozen=True)
class Stored:
    """What :meth:`BlobStore.put` wrote: the content's address and size, and how much was new on disk."""

    address: str
    size: int
    chunks: int
    new_chunks: int
    new_bytes: int


@dataclass(frozen=True)
class Swept:
    """What :meth:`BlobStore.sweep` did: records collected, bytes the packs shrank by on disk, packs removed,
    and the bytes of live records it copied out of them."""

    records: int
    freed: int
    packs: int
    copied: int


@dataclass(eq=False)
class Writing:
    """One write in flight (:meth:`BlobStore.writing`): what its content added to the packs."""

    new_bytes: int = 0

    def stored(self, stored: Stored | None) -> None:
        if stored is not None:
            self.new_bytes += stored.new_bytes


@dataclass(frozen=True)
class _Where:
    pack: int
    offset: int  # of the payload
    length: int
    crc: int


class BlobStore:
    """The ``blobs/`` folder of one store: the index of every record, and the writer's last pack."""

    def __init__(self, folder: Path, writable: bool, seal_bytes: int = SEAL_BYTES) -> None:
        self.folder = folder
        self.writable = writable
        self.seal_bytes = seal_bytes
        self._lock = threading.Lock()
        self._index: dict[tuple[bytes, bytes], _Where] = {}
        self._read_to: tuple[int, int] = (0, 0)  # (pack, offset) the index has read up to
        self._last: int = 0  # the last pack's number (0: none yet)
        self._fd: int | None = None
        self._size = 0
        self._loaded = False
        self._readers: dict[int, int] = {}  # pack number -> a read-only fd, opened on first read
        # the sweep's view of writes in flight (docs/store-format.md, "The sweep")
        self._writes: set[Writing] = set()
        self._write_ended = threading.Condition(self._lock)
        self._touched: set[tuple[bytes, bytes]] | None = None  # while a sweep marks: every key a put used
        self.orphaned = 0  # new bytes of writes whose commit never landed, since the last sweep

    # -- the index ----------------------------------------------------------------------------------

    def _packs(self) -> list[int]:
        if not self.folder.is_dir():
            return []
        return sorted(
            int(p.name[:-5])
            for p in self.folder.iterdir()
            if p.name.endswith(".pack") and p.name[:-5].isdigit() and len(p.name) == 25
        )

    def _load(self) -> None:
        """Read record headers from where the index stopped to the end of the last pack (caller holds the lock)."""
        packs = self._packs()
        start_pack, start_offset = self._read_to
        for number in packs:
            if number < start_pack:
                continue
            offset = start_offset if number == start_pack else 0
            self._read_to = (number, self._scan(number, offset, last=number == packs[-1]))
            self._last = number
        self._loaded = True

    def _scan(self, number: int, offset: int, last: bool) -> int:
        """Index the records of one pack from ``offset``; answer the offset after the last whole record."""
        found, end = self._records(number, offset, last)
        for kind, key, where in found:
            self._index.setdefault((kind, key), where)  # a record copied by a sweep that died: the first stands
        return end

    def _records(self, number: int, offset: int, last: bool) -> tuple[list[tuple[bytes, bytes, _Where]], int]:
        """Every whole record of one pack from ``offset`` (kind, key, where), and the offset after the last."""
        path = self.folder / pack_name(number)
        found: list[tuple[bytes, bytes, _Where]] = []
        with open(path, "rb") as f:
            if offset < HEADER_SIZE:
                head = f.read(HEADER_SIZE)
                if len(head) < HEADER_SIZE and last:
                    return found, 0  # a pack whose header never landed: nothing in it yet
                magic, version, crc = _header.unpack_from(head.ljust(HEADER_SIZE, b"\0"), 0)
                if magic != MAGIC or crc32(head[:12]) != crc or version != VERSION:
                    raise R.StoreUnservableError(f"blobs/{path.name}: bad pack header", reason="torn-blob-pack")
                offset = HEADER_SIZE
            end = os.fstat(f.fileno()).st_size
            while offset < end:
                f.seek(offset)
                head = f.read(RECORD_HEADER_SIZE)
                kind, length, key, crc = _record.unpack(head.ljust(RECORD_HEADER_SIZE, b"\0"))
                body = offset + RECORD_HEADER_SIZE
                if len(head) < RECORD_HEADER_SIZE or kind not in (CHUNK, RECIPE) or body + length > end:
                    if last and _never_landed(f, offset, end):
                        break  # a record cut short at the end of the last pack never landed
                    raise R.StoreUnservableError(
                        f"blobs/{path.name}: a record at offset {offset} is cut short or damaged",
                        reason="torn-blob-pack",
                    )
                found.append((kind, key, _Where(number, body, length, crc)))
                offset = body + length
        return found, offset

    def _find(self, kind: bytes, key: bytes) -> _Where | None:
        """Where a record is, its pack opened for reading (so a sweep that removes the pack later leaves the
        answer readable: the open file outlives its name)."""
        with self._lock:
            if not self._loaded:
                self._load()
            where = self._index.get((kind, key))
            if where is None and not self.writable:
                self._load()  # a live writer may have appended it since
                where = self._index.get((kind, key))
            if where is not None and where.pack not in self._readers:
                try:
                    self._readers[where.pack] = os.open(self.folder / pack_name(where.pack), os.O_RDONLY)
                except FileNotFoundError:  # the writer's sweep moved its records: index the packs anew
                    self._index.clear()
                    self._read_to = (0, 0)
                    self._load()
                    where = self._index.get((kind, key))
                    if where is not None and where.pack not in self._readers:
                        self._readers[where.pack] = os.open(self.folder / pack_name(where.pack), os.O_RDONLY)
            return where

    # -- writing ------------------------------------------------------------------------------------

    def _open_last(self) -> None:
        """Open the last pack for appending, cutting a torn tail away, or start pack 1 (caller holds the lock)."""
        if not self._loaded:
            self._load()
        if self._last == 0 or self._read_to[1] >= self.seal_bytes:
            self._new_pack(self._last + 1)
            return
        path = self.folder / pack_name(self._last)
        fd = os.open(path, os.O_WRONLY)
        good = self._read_to[1]
        if good < HEADER_SIZE:
            os.ftruncate(fd, 0)
            os.pwrite(fd, encode_header(), 0)
            good = HEADER_SIZE
        elif os.fstat(fd).st_size != good:
            os.ftruncate(fd, good)  # the torn tail never landed: new records follow the last whole one
        os.fsync(fd)
        os.lseek(fd, good, os.SEEK_SET)
        self._fd, self._size = fd, good

    def _new_pack(self, number: int) -> None:
        self.folder.mkdir(exist_ok=True)
        if self._fd is not None:
            os.close(self._fd)
        fd = os.open(self.folder / pack_name(number), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, encode_header())
        os.fsync(fd)
        fsync_dir(self.folder)
        self._fd, self._size, self._last = fd, HEADER_SIZE, number
        self._read_to = (number, HEADER_SIZE)

    def _append(self, kind: bytes, key: bytes, payload: memoryview | bytes) -> int:
        """Append one record (not yet fsynced); answer the bytes written. The caller holds the lock."""
        if self._fd is None:
            self._open_last()
        elif self._size >= self.seal_bytes:
            os.fsync(self._fd)  # seal: everything in it is durable before the next pack begins
            self._new_pack(self._last + 1)
        assert self._fd is not None
        crc = crc32(payload)
        head = _record.pack(kind, len(payload), key, crc)
        offset = self._size
        written = os.writev(self._fd, [head, payload])  # one call a record
        if written < len(head) + len(payload):  # a short write (a signal, a full disk): the rest, piece by piece
            rest = memoryview(head + bytes(payload))[written:]
            while rest:
                rest = rest[os.write(self._fd, rest) :]
        self._size += len(head) + len(payload)
        self._read_to = (self._last, self._size)
        self._index[(kind, key)] = _Where(self._last, offset + len(head), len(payload), crc)
        return len(head) + len(payload)

    def put(self, data: bytes | bytearray | memoryview, store: bool = True) -> Stored:
        """Store ``data``; answers once every new record is durable. ``store`` False: what storing it would
        answer, with nothing written (:class:`Measuring`)."""
        return self.put_chunks(data, [], 0, store)

    def put_chunks(
        self,
        data: bytes | bytearray | memoryview,
        prefix: list[tuple[int, bytes]],
        prefix_size: int,
        store: bool = True,
    ) -> Stored:
        """Store content made of the chunks ``prefix`` (already stored, ``prefix_size`` bytes) then ``data``,
        re-chunked; ``address`` is over the whole. (An append passes the old content's chunks but its last.)
        ``store`` False cuts and hashes the same way and counts what would be new, but writes nothing, so
        a write staged and never committed (``policy.check``) names the content a commit would."""
        if store and not self.writable:
            raise R.BRAINY_WRITER_LOCKED("this blob store is read-only", holder={})
        view = memoryview(data).cast("B")
        whole = hashlib.sha256()
        for n, key in prefix:
            for stored in self._chunk_bytes(key, n, None):
                whole.update(stored)
        chunks = list(prefix)
        start, new_chunks, new_bytes = 0, 0, 0
        unstored: set[bytes] = set()  # with nothing written, a chunk met twice is new once
        touched = self._touched if store else None  # a sweep marks what a write uses, not what a measure does
        with self._lock:
            if touched is not None:  # a sweep is marking: what this content uses is in use
                touched.update((CHUNK, key) for _, key in prefix)
            for end in cdc.cuts(view):
                piece = view[start:end]
                key = hashlib.sha256(piece).digest()
                whole.update(piece)  # while the piece is in cache: one pass over memory, not two
                chunks.append((end - start, key))
                if touched is not None:
                    touched.add((CHUNK, key))
                if not self._has(CHUNK, key) and key not in unstored:
                    if store:
                        new_bytes += self._append(CHUNK, key, piece)
                    else:
                        unstored.add(key)
                        new_bytes += RECORD_HEADER_SIZE + len(piece)
                    new_chunks += 1
                start = end
            digest = whole.digest()
            if touched is not None:
                touched.add((RECIPE, digest))
            if not self._has(RECIPE, digest):
                recipe = encode_recipe(chunks)
                new_bytes += self._append(RECIPE, digest, recipe) if store else RECORD_HEADER_SIZE + len(recipe)
            if new_bytes and store:
                assert self._fd is not None
                os.fsync(self._fd)
        return Stored(address(digest), prefix_size + len(view), len(chunks), new_chunks, new_bytes)

    def append(
        self, old: str, data: bytes | bytearray | memoryview, path: str | None = None, store: bool = True
    ) -> Stored:
        """Store ``old``'s content followed by ``data``. Chunking restarts at old's last cut, so every chunk
        but the last is shared with ``old`` (docs/store-format.md: a cut depends only on the bytes since
        the one before). ``store`` False: what it would answer, nothing written."""
        chunks = self.recipe(old, path)
        if not chunks:
            return self.put(data, store)
        *prefix, (length, key) = chunks
        last = b"".join(self._chunk_bytes(key, length, (old, path)))
        return self.put_chunks(last + bytes(data), prefix, sum(n for n, _ in prefix), store)

    def measuring(self) -> Measuring:
        """This store as a write staged and never committed sees it (:class:`Measuring`)."""
        return Measuring(self)

    def _has(self, kind: bytes, key: bytes) -> bool:
        if not self._loaded:
            self._load()
        return (kind, key) in self._index

    # -- reading ------------------------------------------------------------------------------------

    def _reader(self, pack: int) -> int:
        fd = self._readers.get(pack)
        if fd is None:
            with self._lock:
                fd = self._readers.get(pack)
                if fd is None:
                    fd = self._readers[pack] = os.open(self.folder / pack_name(pack), os.O_RDONLY)
        return fd

    def _payload(self, where: _Where) -> bytes:
        return os.pread(self._reader(where.pack), where.length, where.offset)

    def recipe(self, address_text: str, path: str | None = None) -> list[tuple[int, bytes]]:
        """The (length, key) of every chunk of a content, its recipe checked."""
        key = digest_of(address_text)
        where = self._find(RECIPE, key)
        if where is None:
            raise self._corrupt(address_text, path, "its recipe is in no pack")
        payload = self._payload(where)
        if len(payload) != where.length or crc32(payload) != where.crc:
            raise self._corrupt(address_text, path, "its recipe fails its checksum")
        try:
            return decode_recipe(payload)
        except (ValueError, struct.error):
            raise self._corrupt(address_text, path, "its recipe does not decode") from None

    def _chunk_bytes(self, key: bytes, length: int, name: tuple[str, str | None] | None) -> Iterator[bytes]:
        where = self._find(CHUNK, key)
        payload = self._payload(where) if where is not None else None
        if payload is None or len(payload) != length or hashlib.sha256(payload).digest() != key:
            text, path = name or (address(key), None)
            raise self._corrupt(text, path, f"chunk {key.hex()[:16]}… is missing or does not hash to its key")
        yield payload

    def read(self, address_text: str, path: str | None = None) -> Iterator[bytes]:
        """The content's bytes, one verified chunk at a time; BlobCorruptError before any bad byte."""
        chunks = self.recipe(address_text, path)
        whole = hashlib.sha256()
        for length, key in chunks:
            for piece in self._chunk_bytes(key, length, (address_text, path)):
                whole.update(piece)
                yield piece
        if address(whole.digest()) != address_text:  # every chunk checked: only a recipe forged whole fails here
            raise self._corrupt(address_text, path, "the content does not hash to its address")

    def _located(self, address_text: str, path: str | None) -> tuple[list[tuple[int, bytes]], list[_Where | None]]:
        """A content's recipe and where each of its chunks lies (None: in no pack)."""
        chunks = self.recipe(address_text, path)
        return chunks, [self._find(CHUNK, key) for _, key in chunks]

    def _damage(
        self, address_text: str, path: str | None, chunks: list[tuple[int, bytes]], found: list[_Where | None]
    ) -> R.Refusal:
        """The refusal for content that failed its address: it names the first chunk that fails its own key."""
        for (length, key), where in zip(chunks, found):
            piece = self._payload(where) if where is not None and where.length == length else None
            if piece is None or len(piece) != length or hashlib.sha256(piece).digest() != key:
                return self._corrupt(
                    address_text, path, f"chunk {key.hex()[:16]}… is missing or does not hash to its key"
                )
        return self._corrupt(address_text, path, "the content does not hash to its address")

    def read_all(self, address_text: str, path: str | None = None) -> bytearray:
        """The whole content, verified against its address before a byte of it is answered (a bytearray: the
        buffer the chunks were read into, not a copy of it).

        One hashing pass over the whole (the chunks are checked one by one only to name a damaged one),
        which is what lets a verified read run at the hash's own speed."""
        chunks, found = self._located(address_text, path)
        # every chunk read straight into one buffer (no bytes object per chunk, no join)
        if all(where is not None and where.length == length for where, (length, _) in zip(found, chunks)):
            data = bytearray(sum(length for length, _ in chunks))
            view, at = memoryview(data), 0
            for where in found:
                assert where is not None
                if os.preadv(self._reader(where.pack), [view[at : at + where.length]], where.offset) != where.length:
                    break  # a pack shorter than its index says: named below
                at += where.length
            else:
                if address(hashlib.sha256(data).digest()) == address_text:
                    return data
        raise self._damage(address_text, path, chunks, found)

    def pieces(self, address_text: str, path: str | None = None) -> Iterator[memoryview]:
        """The content's bytes in order, as views into one reused buffer: each is valid only until the next
        is asked for. The whole is checked against its address after the last piece, and damage raises
        BlobCorruptError (naming the damaged chunk) from the loop: a caller keeps nothing it made of the
        pieces until the loop has ended.

        For a caller that turns the bytes into something else (text, base64) as they come: the content is
        never gathered into one buffer, each piece is read (adjacent records of a pack in one pread, up
        to SPAN_BYTES) and transformed while it is still in cache from its hash."""
        chunks, found = self._located(address_text, path)
        if not all(where is not None and where.length == length for where, (length, _) in zip(found, chunks)):
            raise self._damage(address_text, path, chunks, found)
        located: list[_Where] = found  # type: ignore[assignment]  # none is None: checked above
        buffer = memoryview(bytearray(min(SPAN_BYTES, sum(w.length + RECORD_HEADER_SIZE for w in located)) or 1))
        whole = hashlib.sha256()
        i, n = 0, len(located)
        while i < n:
            first = located[i]
            end, j = first.offset + first.length, i + 1
            while (
                j < n
                and located[j].pack == first.pack
                and located[j].offset == end + RECORD_HEADER_SIZE
                and located[j].offset + located[j].length - first.offset <= len(buffer)
            ):
                end, j = located[j].offset + located[j].length, j + 1  # the next record follows this one
            span = end - first.offset
            if span > len(buffer):  # a chunk larger than the buffer (a buffer sized to a small content)
                buffer = memoryview(bytearray(span))
            if os.preadv(self._reader(first.pack), [buffer[:span]], first.offset) != span:
                raise self._damage(address_text, path, chunks, found)  # a pack shorter than its index says
            for where in located[i:j]:
                piece = buffer[where.offset - first.offset : where.offset - first.offset + where.length]
                whole.update(piece)
                yield piece
            i = j
        if address(whole.digest()) != address_text:
            raise self._damage(address_text, path, chunks, found)

    def size(self, address_text: str, path: str | None = None) -> int:
        return sum(n for n, _ in self.recipe(address_text, path))

    def contains(self, address_text: str) -> bool:
        return self._find(RECIPE, digest_of(address_text)) is not None

    @staticmethod
    def _corrupt(address_text: str, path: str | None, why: str) -> R.Refusal:
        named = f" ({path})" if path else ""
        return R.BlobCorruptError(
            f"blob {address_text}{named}: {why}; it is not served", address=address_text, path=path
        )

    # -- accounting and the sweep ----------------------------------------------------------------------

    def _reached(self, referenced: Iterable[str], strict: bool) -> set[tuple[bytes, bytes]]:
        """The records the addresses reach: their recipes and every chunk those list. ``strict``: a recipe that
        does not read is BlobCorruptError (a sweep must not guess which chunks it lists)."""
        keep: set[tuple[bytes, bytes]] = set()
        for text in referenced:
            key = digest_of(text)
            keep.add((RECIPE, key))
            try:
                keep.update((CHUNK, k) for _, k in self.recipe(text))
            except R.Refusal:
                if strict:
                    raise
        return keep

    def unreferenced(self, referenced: Iterable[str]) -> tuple[int, int]:
        """(records, payload bytes) that no address in ``referenced`` reaches: what a sweep could collect."""
        keep = self._reached(referenced, strict=False)
        with self._lock:
            if not self._loaded:
                self._load()
            garbage = [w for k, w in self._index.items() if k not in keep]
        return len(garbage), sum(w.length for w in garbage)

    @contextmanager
    def writing(self) -> Iterator[Writing]:
        """The span of one write, from storing its content to its commit being durable: a sweep waits for the
        writes in flight when it begins, so it never collects what one stored or found stored. A write that
        ends in an exception (its commit refused) adds what it stored to :attr:`orphaned`."""
        scope = Writing()
        with self._lock:
            self._writes.add(scope)
        try:
            yield scope
        except BaseException:
            self.orphaned += scope.new_bytes
            raise
        finally:
            with self._lock:
                self._writes.discard(scope)
                self._write_ended.notify_all()

    def sweep(self, referenced: Callable[[], Iterable[str]], garbage_share: float = 0.5) -> Swept:
        """Collect the records no address from ``referenced()`` reaches (docs/store-format.md, "The sweep").

        ``referenced`` answers every address a row of any retained generation names; it is called once the
        writes in flight at the start have ended, and every put from the start on is kept as well. A pack
        whose garbage is at least ``garbage_share`` of its bytes is rewritten: its live records are copied
        (each verified) to the end of the last pack, made durable, then the pack is removed. Packs with
        less garbage are left whole, so a sweep copies at most as much as it frees."""
        if not self.writable:
            raise R.BRAINY_WRITER_LOCKED("this blob store is read-only", holder={})
        try:
            with self._lock:
                if not self._loaded:
                    self._load()
        except R.StoreUnservableError as exc:  # a pack that does not index: no record can be told live or not
            log.error("blob sweep skipped: %s", exc)
            return Swept(0, 0, 0, 0)
        with self._lock:
            in_flight = set(self._writes)
            self._touched = set()
            orphaned = self.orphaned
        try:
            with self._lock:
                while in_flight & self._writes:
                    self._write_ended.wait()
            keep = self._reached(referenced(), strict=True)
            with self._lock:
                keep |= self._touched
                self._touched = None
                swept = self._collect(keep, garbage_share)
                self.orphaned = max(0, self.orphaned - orphaned)
                return swept
        finally:
            with self._lock:
                self._touched = None

    def _collect(self, keep: set[tuple[bytes, bytes]], garbage_share: float) -> Swept:
        """Rewrite the packs whose garbage reaches ``garbage_share`` of their bytes (the caller holds the lock)."""
        if not self._loaded:
            self._load()
        packs = self._packs()
        victims: list[tuple[int, list[tuple[bytes, bytes, _Where]], int]] = []
        for number in packs:
            found, _ = self._records(number, 0, last=number == packs[-1])
            live = [
                (kind, key, w) for kind, key, w in found if (kind, key) in keep and self._index.get((kind, key)) == w
            ]
            total = sum(RECORD_HEADER_SIZE + w.length for _, _, w in found)
            dead = total - sum(RECORD_HEADER_SIZE + w.length for _, _, w in live)
            if found and dead and dead >= garbage_share * total:
                victims.append((number, live, len(found) - len(live)))
        if not victims:
            return Swept(0, 0, 0, 0)
        if any(number == self._last for number, _, _ in victims):
            if self._fd is not None:
                os.fsync(self._fd)
            self._new_pack(self._last + 1)  # the copies go to a pack no victim is
        before = self.disk_bytes()
        removed, records, copied = [], 0, 0
        for number, live, dead_records in victims:
            fd = self._readers.get(number)
            if fd is None:
                fd = self._readers[number] = os.open(self.folder / pack_name(number), os.O_RDONLY)
            intact = True
            for kind, key, where in live:
                payload = os.pread(fd, where.length, where.offset)
                if (
                    len(payload) != where.length
                    or crc32(payload) != where.crc
                    or (kind == CHUNK and hashlib.sha256(payload).digest() != key)
                ):
                    intact = False  # a damaged live record: its pack stays, for the read that names it
                    break
                copied += self._append(kind, key, payload)
            if intact:
                removed.append(number)
                records += dead_records
        if copied:
            assert self._fd is not None
            os.fsync(self._fd)  # every copy durable before the pack it came from goes
        log.debug("sweep copied %d bytes", copied)
        gone = set(removed)
        for entry in [k for k, w in self._index.items() if w.pack in gone]:
            del self._index[entry]  # what is left there is garbage: a later put stores it anew
        for number in removed:
            (self.folder / pack_name(number)).unlink()  # open readers keep reading it until they close
            log.debug("sweep removed %s", pack_name(number))
        if removed:
            fsync_dir(self.folder)
        log.debug("sweep done")
        return Swept(records, max(0, before - self.disk_bytes()), len(removed), copied)

    def records(self) -> tuple[int, int]:
        """(recipes, chunks) the packs hold: how many contents are stored, and in how many chunks."""
        with self._lock:
            if not self._loaded:
                self._load()
            recipes = sum(1 for kind, _ in self._index if kind == RECIPE)
        return recipes, len(self._index) - recipes

    def disk_bytes(self) -> int:
        """The bytes the packs take on disk."""
        return sum((self.folder / pack_name(n)).stat().st_size for n in self._packs())

    def close(self) -> None:
        with self._lock:
            for fd in [self._fd, *self._readers.values()]:
                if fd is not None:
                    os.close(fd)
            self._fd, self._readers = None, {}


class Measuring:
    """A blob store's face for a write that is staged and never committed (``policy.check``): ``put`` and
    ``append`` answer the address, size and chunks a commit's would, reading what is stored and writing
    nothing, so a read handle can stage a file write too; reads go to the store."""

    def __init__(self, blobs: BlobStore) -> None:
        self._blobs = blobs

    def put(self, data: bytes | bytearray | memoryview) -> Stored:
        return self._blobs.put(data, store=False)

    def append(self, old: str, data: bytes | bytearray | memoryview, path: str | None = None) -> Stored:
        return self._blobs.append(old, data, path, store=False)

    def read_all(self, address_text: str, path: str | None = None) -> bytearray:
        return self._blobs.read_all(address_text, path)

"""An S3-compatible object store, spoken directly: the four calls shipping makes, signed with AWS Signature V4.

Why our own client and not boto3 (measured by ``perf/bench_s3.py``, figures in the commit that chose it): a
shipped segment is small (a group commit's frames, a few KiB), so what a ``--ship sync`` write waits on is the
client's cost per call, not its bandwidth; botocore's per-call machinery (its model-driven serialiser, its event
hooks, its retry handler) costs several times the round trip to a local store. The calls shipping makes are four
(a conditional put, a get, a list, a bucket create for tests and first starts), each a few lines of SigV4 over
a kept-alive socket per thread: the request framed in one piece (``http1.request_bytes``) and sent by one
``sendall``, the answer read by the one HTTP/1.1 reader brainy has (``brainy.client.wire.Reader``, httptools).
``http.client``, used before, cost 0.5-0.9 ms of CPU a put (its header parsing through ``email``, a send per
header), on the GIL a ``--ship sync`` round's commits need.

Configuration is the standard one: ``AWS_ENDPOINT_URL`` (absent: ``https://s3.<region>.amazonaws.com``),
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN`` (optional), ``AWS_DEFAULT_REGION``
(absent: ``us-east-1``). Requests are path-style (``/BUCKET/KEY``), which every S3-compatible store answers.

Every call blocks: shipping runs on the brain's fsync workers and its own thread, never on the event loop.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import functools
import hashlib
import hmac
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlsplit
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from brainy.client.wire import Reader
from brainy.fleet.http1 import request_bytes

# an object up to SINGLE_PUT bytes is one put; a larger one (a large brain's snapshot) a multipart upload of
# PART_BYTES parts (S3: parts of 5 MiB to 5 GiB, at most 10,000 of them: objects up to 640 GiB here)
SINGLE_PUT = 64 << 20
DELETES = 1000  # objects one DeleteObjects call names, at most
PART_BYTES = 64 << 20
CALL_SECONDS = 10.0  # one call; a sync write waits on it, so a store that hangs longer is unreachable
READ_CHUNK = 1 << 16
ATTEMPTS = 3  # a call whose connection broke (a kept-alive socket the store closed) is tried again this often
_EMPTY_SHA = hashlib.sha256(b"").hexdigest()
_XMLNS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
log = logging.getLogger("brainy.fleet.objectstore")


class ObjectStoreError(Exception):
    """The object store did not answer a call, or answered it with an error shipping cannot go past."""


class ObjectExistsError(ObjectStoreError):
    """A conditional put (``If-None-Match: *``) found the name taken: another writer stored it first."""


@dataclass(frozen=True, slots=True)
class Location:
    """Where a fleet's objects go: ``s3://BUCKET[/PREFIX]`` read apart. ``prefix`` is '' or ends in '/'."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> Location:
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
            raise ValueError(f"--object-store {url!r}: s3://BUCKET[/PREFIX]")
        prefix = parts.path.strip("/")
        return cls(parts.netloc, prefix + "/" if prefix else "")


@dataclass(frozen=True, slots=True)
class Credentials:
    """Endpoint, region and keys, from the standard environment variables."""

    endpoint: str
    region: str
    access_key: str
    secret_key: str
    token: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Credentials:
        region = environ.get("AWS_DEFAULT_REGION") or environ.get("AWS_REGION") or "us-east-1"
        endpoint = environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
        access, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
        if not access or not secret:
            raise ValueError("--object-store: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
        return cls(
            endpoint or f"https://s3.{region}.amazonaws.com", region, access, secret, environ.get("AWS_SESSION_TOKEN")
        )


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


@functools.lru_cache(maxsize=8)
def _signing_key(secret: str, day: str, region: str) -> bytes:
    """SigV4's key of a day (four HMACs): the same for every call that day, so made once."""
    return _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), day), region), "s3"), "aws4_request")


def sign(
    method: str,
    path: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    payload_sha: str,
    creds: Credentials,
    now: datetime.datetime,
) -> dict[str, str]:
    """``headers`` plus the SigV4 ones (``x-amz-date``, ``x-amz-content-sha256``, ``authorization``) for S3.

    The canonical request is AWS's: method, the URI-encoded path, the sorted query, the signed headers (lower
    case, sorted), their names, the payload's SHA-256; the string to sign names the day's scope."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    out = dict(headers)
    out["x-amz-date"] = stamp
    out["x-amz-content-sha256"] = payload_sha
    if creds.token:
        out["x-amz-security-token"] = creds.token
    names = sorted(k.lower() for k in out)
    lowered = {k.lower(): v.strip() for k, v in out.items()}
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query))
    canonical = "\n".join(
        [
            method,
            quote(path, safe="/-_.~"),
            canonical_query,
            "".join(f"{n}:{lowered[n]}\n" for n in names),
            ";".join(names),
            payload_sha,
        ]
    )
    scope = f"{day}/{creds.region}/s3/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = _signing_key(creds.secret_key, day, creds.region)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={creds.access_key}/{scope}, SignedHeaders={';'.join(names)}, "
        f"Signature={signature}"
    )
    return out


class ObjectStore:
    """One bucket (and prefix) of an S3-compatible store; names given to its calls are below the prefix."""

    def __init__(self, location: Location, creds: Credentials, timeout: float = CALL_SECONDS) -> None:
        self.location = location
        self.creds = creds
        self.timeout = timeout
        parts = urlsplit(creds.endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"AWS_ENDPOINT_URL {creds.endpoint!r}: http(s)://HOST[:PORT]")
        self._secure = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._secure else 80)
        self._host_field = parts.netloc
        self._tls = ssl.create_default_context() if self._secure else None
        self._local = threading.local()  # one kept-alive connection per calling thread
        # every connection kept, with the thread it is kept for: :meth:`close` closes them all, and one kept for a
        # thread that has ended is closed when the next is made (the fsync workers of a brain closed, a restore's
        # fetches): left to the collector, its socket stayed open until some later pass, on any thread
        self._kept: list[tuple[threading.Thread, socket.socket]] = []
        self._kept_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, environ: Mapping[str, str] = os.environ) -> ObjectStore:
        return cls(Location.parse(url), Credentials.from_environment(environ))

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self._host, self._port), timeout=self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                return self._tls.wrap_socket(sock, server_hostname=self._host)
        except BaseException:
            sock.close()
            raise
        return sock

    def _connection(self) -> socket.socket:
        """The calling thread's kept-alive connection to the store, made when it has none."""
        sock = getattr(self._local, "sock", None)
        if sock is None:
            sock = self._connect()
            self._local.sock = sock
            with self._kept_lock:
                ended = [kept for thread, kept in self._kept if not thread.is_alive()]
                self._kept = [(thread, kept) for thread, kept in self._kept if thread.is_alive()]
                self._kept.append((threading.current_thread(), sock))
            for kept in ended:
                kept.close()
        return sock

    def _drop(self) -> None:
        sock = getattr(self._local, "sock", None)
        if sock is not None:
            sock.close()
            self._local.sock = None
            with self._kept_lock:
                self._kept = [(thread, kept) for thread, kept in self._kept if kept is not sock]

    def request(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        """One signed call: (status, body, the answer's fields, lower-case names). A broken kept-alive connection
        (the store closed it while idle) is tried again on a new one."""
        query = query or []
        last: Exception | None = None
        for attempt in range(ATTEMPTS):
            data = self._framed(method, path, query, body, headers)  # signed now: a retry's date is its own
            try:
                sock = self._connection()
                sock.sendall(data)
                reader = Reader()
                while not reader.done:
                    chunk = sock.recv(READ_CHUNK)
                    if not chunk:
                        reader.eof()
                    reader.feed(chunk)
                answer = reader.response
                if not answer.keep:
                    self._drop()
                return answer.status, answer.body, answer.headers
            except (OSError, ValueError) as exc:  # ValueError: cut short or garbled (wire.Reader)
                self._drop()
                last = exc
                if attempt + 1 < ATTEMPTS:
                    time.sleep(0.05 * (attempt + 1))
        raise ObjectStoreError(f"the object store did not answer {method} {path}: {last}")

    def _framed(
        self, method: str, path: str, query: list[tuple[str, str]], body: bytes, headers: dict[str, str] | None
    ) -> bytes:
        """A call's request bytes, signed now (``host`` is signed, and framed once, by request_bytes)."""
        sha = hashlib.sha256(body).hexdigest() if body else _EMPTY_SHA
        target = quote(path, safe="/-_.~")
        if query:
            target += "?" + "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query))
        fields = dict(headers or {})
        fields["host"] = self._host_field
        signed = sign(method, path, query, fields, sha, self.creds, datetime.datetime.now(datetime.UTC))
        del signed["host"]
        return request_bytes(method, target, self._host_field, list(signed.items()), body)

    def _path(self, name: str = "") -> str:
        return f"/{self.location.bucket}/{self.location.prefix}{name}" if name else f"/{self.location.bucket}"

    @staticmethod
    def _error(status: int, data: bytes, what: str) -> ObjectStoreError:
        code = ""
        try:
            found = ElementTree.fromstring(data).find("Code")
            code = found.text or "" if found is not None else ""
        except ElementTree.ParseError:
            pass
        return ObjectStoreError(f"the object store refused {what}: {status} {code}".rstrip())

    def create_bucket(self) -> None:
        """Create the bucket; one that exists already (ours or anyone's we may write) is fine."""
        status, data, _ = self.request("PUT", self._path())
        if status not in (200, 409):
            raise self._error(status, data, "the bucket's creation")

    def put_new(self, name: str, data: bytes) -> None:
        """Store ``data`` as ``name`` only if no object has that name (``If-None-Match: *``): an object is written
        once and never replaced. ObjectExistsError when the name was taken."""
        status, answer, _ = self.request("PUT", self._path(name), body=data, headers={"if-none-match": "*"})
        if status == 412:
            raise ObjectExistsError(f"object {name} exists already")
        if status != 200:
            raise self._error(status, answer, f"the put of {name}")

    def put_new_stream(self, name: str, size: int, chunks: Iterable[bytes]) -> None:
        """:meth:`put_new` of an object of ``size`` bytes given in ``chunks``, never whole in memory when it is
        larger than :data:`SINGLE_PUT`: a multipart upload of :data:`PART_BYTES` parts, completed only if no
        object has the name (``If-None-Match: *`` on the completion), aborted when it does not complete."""
        if size <= SINGLE_PUT:
            self.put_new(name, b"".join(chunks))
            return
        path = self._path(name)
        status, answer, _ = self.request("POST", path, [("uploads", "")])
        upload = ElementTree.fromstring(answer).findtext(f"{_XMLNS}UploadId") if status == 200 else None
        if not upload:
            raise self._error(status, answer, f"the start of the upload of {name}")
        try:
            parts: list[str] = []
            pending = bytearray()
            for chunk in chunks:
                pending += chunk
                while len(pending) >= PART_BYTES:
                    parts.append(self._part(path, upload, len(parts) + 1, bytes(pending[:PART_BYTES])))
                    del pending[:PART_BYTES]
            if pending or not parts:
                parts.append(self._part(path, upload, len(parts) + 1, bytes(pending)))
            listed = "".join(
                f"<Part><PartNumber>{n}</PartNumber><ETag>{tag}</ETag></Part>" for n, tag in enumerate(parts, 1)
            )
            body = f"<CompleteMultipartUpload>{listed}</CompleteMultipartUpload>".encode()
            status, answer, _ = self.request("POST", path, [("uploadId", upload)], body, {"if-none-match": "*"})
            if status == 412:
                raise ObjectExistsError(f"object {name} exists already")
            # a completion can fail inside a 200 (the error is its body): only a result is success
            if status != 200 or b"CompleteMultipartUploadResult" not in answer:
                raise self._error(status, answer, f"the completion of the upload of {name}")
        except BaseException:
            try:
                self.request("DELETE", path, [("uploadId", upload)])  # its parts are not kept (nor billed)
            except ObjectStoreError as exc:
                log.warning("the upload of %s was not aborted (the store's lifecycle rules end it): %s", name, exc)
            raise

    def _part(self, path: str, upload: str, number: int, data: bytes) -> str:
        """Store one part of a multipart upload: its ETag."""
        status, answer, fields = self.request("PUT", path, [("partNumber", str(number)), ("uploadId", upload)], data)
        tag = fields.get("etag")
        if status != 200 or not tag:
            raise self._error(status, answer, f"part {number} of {path}")
        return tag

    @contextlib.contextmanager
    def reading(self, name: str) -> Iterator[Callable[[int], bytes] | None]:
        """The object ``name`` read as it arrives, on a connection of its own (the caller's other calls go on
        meanwhile): yields ``read(n)`` (at most ``n`` bytes, ``b""`` at the end), or None when there is none."""
        try:
            sock = self._connect()
        except OSError as exc:
            raise ObjectStoreError(f"the object store did not answer GET {name}: {exc}") from None
        try:
            reader = Reader(held=True)  # a 200's body handed out as it comes; any other status's kept whole
            pieces: list[bytes] = []

            def more() -> None:
                """Read on until a piece of the body or the answer's end has come."""
                try:
                    while not pieces and not reader.done:
                        chunk = sock.recv(READ_CHUNK)
                        if not chunk:
                            reader.eof()
                        reader.feed(chunk)
                        pieces.extend(reader.take())
                except (OSError, ValueError) as exc:
                    raise ObjectStoreError(f"the object store broke off GET {name}: {exc}") from None

            try:
                sock.sendall(self._framed("GET", self._path(name), [], b"", None))
                while not reader.response.status and not reader.done:
                    more()
            except (OSError, ObjectStoreError) as exc:
                raise ObjectStoreError(f"the object store did not answer GET {name}: {exc}") from None
            status = reader.response.status
            if status == 404:
                yield None
                return
            if status != 200:
                while not reader.done:
                    more()
                raise self._error(status, reader.response.body, f"the get of {name}")

            def read(n: int) -> bytes:
                more()
                if not pieces:
                    return b""
                piece = pieces[0]
                if len(piece) <= n:
                    return pieces.pop(0)
                pieces[0] = piece[n:]
                return piece[:n]

            yield read
        finally:
            sock.close()

    def delete(self, names: list[str]) -> None:
        """Delete the objects ``names`` (at most :data:`DELETES` a call: S3's DeleteObjects); one already gone is
        fine."""
        if not names:
            return
        if len(names) > DELETES:
            raise ValueError(f"at most {DELETES} objects a delete")
        base = self.location.prefix
        keys = "".join(f"<Object><Key>{escape(base + name)}</Key></Object>" for name in names)
        body = f"<Delete><Quiet>true</Quiet>{keys}</Delete>".encode()
        digest = base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode()  # S3 asks for it
        status, data, _ = self.request("POST", self._path(), [("delete", "")], body, {"content-md5": digest})
        if status != 200:
            raise self._error(status, data, f"the delete of {len(names)} objects")
        failed = ElementTree.fromstring(data).find(f"{_XMLNS}Error")  # a quiet answer lists the failures only
        if failed is not None:
            code, key = failed.findtext(f"{_XMLNS}Code") or "", failed.findtext(f"{_XMLNS}Key") or ""
            raise ObjectStoreError(f"the object store did not delete {key[len(base) :]}: {code}")

    def get(self, name: str) -> bytes | None:
        """The object ``name``'s bytes; None when there is none."""
        status, data, _ = self.request("GET", self._path(name))
        if status == 404:
            return None
        if status != 200:
            raise self._error(status, data, f"the get of {name}")
        return data

    def list(self, prefix: str, start_after: str = "") -> list[str]:
        """Every object name starting with ``prefix`` (below the store's own), in name order; with
        ``start_after``, only the names after it (S3's ``start-after``: the store skips the rest itself)."""
        names: list[str] = []
        token = ""
        base = self.location.prefix
        for _ in range(100_000):  # a page is at most 1000 names: bounded far past any brain's objects
            query = [("list-type", "2"), ("prefix", base + prefix)]
            if token:
                query.append(("continuation-token", token))
            elif start_after:
                query.append(("start-after", base + start_after))
            status, data, _ = self.request("GET", self._path(), query)
            if status != 200:
                raise self._error(status, data, f"the list of {prefix}")
            root = ElementTree.fromstring(data)
            for item in root.iter(f"{_XMLNS}Contents"):
                key = item.findtext(f"{_XMLNS}Key") or ""
                names.append(key[len(base) :])
            token = root.findtext(f"{_XMLNS}NextContinuationToken") or ""
            if root.findtext(f"{_XMLNS}IsTruncated") != "true" or not token:
                break
        names.sort()
        return names

    def release(self) -> None:
        """Close the calling thread's kept connection (a thread done with the store: a restore's fetches)."""
        self._drop()

    def close(self) -> None:
        """Close every kept connection, every thread's (the store is no longer used)."""
        self._drop()
        with self._kept_lock:
            kept, self._kept = self._kept, []
        for _, conn in kept:
            conn.close()

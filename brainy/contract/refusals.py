# Generated from brainy/contract/api-contract.json by tools/gen_contract.py: do not edit.
# Change the contract's "refusals" table, then regenerate with `python tools/gen_contract.py`.
"""Named refusals: one class per entry of ``api-contract.json``'s ``refusals`` table, in its order.

Each class carries its entry: ``status`` (the HTTP status; ``None`` for the WebSocket frame classes and
the startup-only refusal), ``required`` and ``optional`` (the wire fields), ``meaning`` (the default
message: its docstring, which the root reads it from, so it is written once) and, where the entry has one,
``ws`` (the WebSocket frame or close code). The root ``Refusal``, ``REGISTRY`` and ``by_name`` are
``brainy/contract/_refusal_base.py``, where each class registers itself under its name as it is made.

Several names (``FileNotFoundError``, ``FileExistsError``, ``NotADirectoryError``, ``IsADirectoryError``) shadow Python
builtins, so callers import this module (``from brainy.contract import refusals as R``) rather than its names.
"""

from typing import Any, ClassVar

from brainy.contract._refusal_base import REGISTRY, Refusal, by_name


# Request and transport
class BodyDecodeError(Refusal):
    """The body's bytes do not decode cleanly in the declared encoding (e.g. a JSON body declared as msgpack, extra
    bytes after the document, invalid UTF-8)."""

    status = 400
    required = ("encoding",)
    optional = ("offset",)


class UnsupportedMediaTypeError(Refusal):
    """The body is neither JSON nor MessagePack."""

    status = 415
    required = ("contentType",)
    optional = ()


class PayloadTooLargeError(Refusal):
    """The body is over the request limit (64 MiB by default)."""

    status = 413
    required = ("limit",)
    optional = ()


class UnknownDoorError(Refusal):
    """No door exists at this path or under this name."""

    status = 404
    required = ()
    optional = ("door", "path")


class MethodNotAllowedError(Refusal):
    """The path exists, but with a different method."""

    status = 405
    required = ("allowed",)
    optional = ()


class InvalidArgumentError(Refusal):
    """An argument is missing, has the wrong type, is out of range, breaks the door's rules, or uses a reserved field
    or subtype."""

    status = 400
    required = ("field", "reason")
    optional = ("matched",)


class CursorInvalidError(Refusal):
    """The cursor is malformed, or belongs to another door or query."""

    status = 400
    required = ()
    optional = ()


class BadQueryParameterError(Refusal):
    """A change-feed parameter is unusable (since past head, or a limit below 1 or fractional)."""

    status = 400
    required = ("param",)
    optional = ("head",)


class ProtocolVersionError(Refusal):
    """The MCP-Protocol-Version header is not the one revision served."""

    status = 400
    required = ("supported",)
    optional = ()


class TransportNotWiredError(Refusal):
    """The protocol asked for is not built into this build."""

    status = 501
    required = ("transport",)
    optional = ()


class BinaryFrameError(Refusal):
    """A binary WebSocket frame; only JSON text frames are spoken. The session stays open."""

    status = None
    required = ()
    optional = ()
    ws: ClassVar[dict[str, Any] | None] = {"frame": "error"}


class FragmentedFrameError(Refusal):
    """A fragmented WebSocket message; it is not reassembled. The session stays open."""

    status = None
    required = ()
    optional = ()
    ws: ClassVar[dict[str, Any] | None] = {"frame": "error"}


class UnmaskedFrameError(Refusal):
    """A client frame without a mask. The session ends."""

    status = None
    required = ()
    optional = ()
    ws: ClassVar[dict[str, Any] | None] = {"close": 1002}


class ReservedBitError(Refusal):
    """A frame with a reserved bit set. The session ends."""

    status = None
    required = ()
    optional = ()
    ws: ClassVar[dict[str, Any] | None] = {"close": 1002}


class FrameTooLargeError(Refusal):
    """A frame over 8 MiB. The session ends."""

    status = None
    required = ("limit",)
    optional = ()
    ws: ClassVar[dict[str, Any] | None] = {"close": 1009}


class ControlFrameTooLargeError(Refusal):
    """A control frame payload over 125 bytes. The session ends."""

    status = None
    required = ()
    optional = ()
    ws: ClassVar[dict[str, Any] | None] = {"close": 1002}


class MalformedRequestError(Refusal):
    """The request does not parse as HTTP (a bad request line, a broken chunk, garbage, a bad preface). The
    connection closes after the answer."""

    status = 400
    required = ("reason",)
    optional = ()


class HeaderTooLargeError(Refusal):
    """The request's header block is over the limit (64 KiB by default). The connection closes after the answer."""

    status = 431
    required = ("limit",)
    optional = ()


class ShuttingDownError(Refusal):
    """The server is draining for a stop."""

    status = 503
    required = ()
    optional = ()


class InternalError(Refusal):
    """An unexpected fault. Details go to the log under ref."""

    status = 500
    required = ("ref",)
    optional = ()


# Identity and authority
class UnauthenticatedError(Refusal):
    """No bearer, a non-bearer scheme, or an unknown, removed or revoked static key. All of these get one message, so
    they cannot be told apart."""

    status = 401
    required = ()
    optional = ()


class BRAINY_KEY_MALFORMED(Refusal):
    """A bk1. token that does not parse: wrong segments, bad base64url or JSON, or missing claims."""

    status = 401
    required = ()
    optional = ()


class BRAINY_KEY_UNKNOWN_ISSUER(Refusal):
    """The token's issuer is not in the issuers file, or there is no issuers file."""

    status = 401
    required = ("iss",)
    optional = ()


class BRAINY_KEY_BAD_SIGNATURE(Refusal):
    """The signature does not verify against the issuer's key (or the key named by kid)."""

    status = 401
    required = ()
    optional = ()


class BRAINY_KEY_REVOKED(Refusal):
    """The token's jti is in the revoked file and still inside that entry's exp."""

    status = 401
    required = ("jti",)
    optional = ()


class BRAINY_KEY_EXPIRED(Refusal):
    """The token is past its exp."""

    status = 401
    required = ("exp",)
    optional = ()


class BRAINY_KEY_SCOPE(Refusal):
    """The token's scope lacks write, and the door is a write."""

    status = 403
    required = ("door", "scope")
    optional = ()


class BRAINY_KEY_BRAIN(Refusal):
    """The token was minted for a different brain."""

    status = 403
    required = ("brain",)
    optional = ()


class ForbiddenError(Refusal):
    """ "reach" """

    status = 403
    required = ("reason",)
    optional = ()


class PolicyOwnerScopeRequiredError(Refusal):
    """policy.ratify, policy.unlock or policy.freeze called without the owner triple. Static keys always get this."""

    status = 403
    required = ("door",)
    optional = ()


class GuardrailOwnerScopeRequiredError(Refusal):
    """Alias: the host's former spelling of PolicyOwnerScopeRequiredError. Never emitted; listed so old clients can
    map it."""

    status = 403
    required = ("door",)
    optional = ()


class GuardrailOwnerCredentialUnavailableError(Refusal):
    """Retired: a static key calling a ruling door now gets PolicyOwnerScopeRequiredError. Never emitted."""

    status = 403
    required = ()
    optional = ()


class CallerAssertionRefusedError(Refusal):
    """ "malformed" """

    status = 403
    required = ("reason",)
    optional = ()


class ServiceKeyCannotWriteError(Refusal):
    """A service-kind static key with no asserted caller called a row-writing door."""

    status = 403
    required = ("door",)
    optional = ()


class OwnerRungRequiredError(Refusal):
    """accords.decide without the owner rung (an owner triple, or an asserted owner)."""

    status = 403
    required = ("door",)
    optional = ()


class AccordsHostCannotWriteError(Refusal):
    """An accords write reached the profile with no caller (in-process use with no caller bound)."""

    status = 403
    required = ("missing",)
    optional = ()


class MemoryHostCannotWriteError(Refusal):
    """The same, for memory writes."""

    status = 403
    required = ("missing",)
    optional = ()


class GuardrailRefusedError(Refusal):
    """An active policy rule forbids this write."""

    status = 403
    required = ("rules", "caller", "via")
    optional = ()


# Disposition
class NotYetNativeError(Refusal):
    """The door is in the contract, but its implementation has not landed; release is when it arrives. Never a silent
    no-op."""

    status = 501
    required = ("door", "release")
    optional = ()


class InProcessOnlyError(Refusal):
    """The door deals in a live in-process object; instead names what to call over a wire."""

    status = 501
    required = ("door", "instead")
    optional = ()


# Brains, stores, the lease, and indexes
class NoSuchBrainError(Refusal):
    """This process serves no brain by that name. It is never used for an archived brain."""

    status = 404
    required = ("brain",)
    optional = ()


class BrainNameInvalidError(Refusal):
    """The name is not one legal segment (it contains / or %2F, is . or .., starts with ., or is over 64 characters)."""

    status = 400
    required = ("brain",)
    optional = ()


class BrainArchivedError(Refusal):
    """The brain is archived. Its rows are intact, and host.unarchive serves it again."""

    status = 423
    required = ("brain", "archivedAt")
    optional = ()


class BrainExistsError(Refusal):
    """host.provision on a name already taken (archived names included)."""

    status = 409
    required = ("brain",)
    optional = ()


class BrainsDirNotConfiguredError(Refusal):
    """host.provision on a server started without --brains-dir."""

    status = 503
    required = ()
    optional = ()


class StoreNotFoundError(Refusal):
    """The path holds no store. The starter uses this for ./brain."""

    status = 404
    required = ("cure",)
    optional = ()


class StoreUnservableError(Refusal):
    """The store cannot be served as it stands: writer-handoff-in-flight, torn-sstable, newer-record-profile,
    unreadable-generation-stamp, unattested-projection."""

    status = 409
    required = ("reason",)
    optional = ("file",)


class BRAINY_WRITER_LOCKED(Refusal):
    """Another live process holds the writer lease, so writes cannot be taken here. init reports the same code inside
    its answer."""

    status = 409
    required = ("holder",)
    optional = ()


class WriterFenceLostError(Refusal):
    """This process's lease was claimed away (for example by a forced open), so it stops writing."""

    status = 409
    required = ()
    optional = ()


class ProjectionBehindError(Refusal):
    """An index's stamp is behind the committed generation. The server refuses rather than running a recovery scan
    inside a read."""

    status = 503
    required = ("projection", "stamp", "committed")
    optional = ()


class IndexNotAttachedError(Refusal):
    """A leg needs an index this residency has not attached (e.g. no vectors in a read-only attach). The refusal
    names where the query can be served."""

    status = 409
    required = ("absent", "servedBy")
    optional = ()


class OrderBudgetExceededError(Refusal):
    """orderBy would need to read more rows than the budget allows."""

    status = 422
    required = ("matched", "budget", "cure")
    optional = ()


# Rows
class EntityNotFoundError(Refusal):
    """The entity a write, an anchor or similar.to names does not exist. (get answers null instead.)"""

    status = 404
    required = ("id",)
    optional = ()


class RelationNotFoundError(Refusal):
    """The relation does not exist."""

    status = 404
    required = ("id",)
    optional = ()


class EntityExistsError(Refusal):
    """add or import with an id that already exists, and no upsert / onConflict."""

    status = 409
    required = ("id",)
    optional = ()


class DimensionMismatchError(Refusal):
    """A vector of the wrong length."""

    status = 422
    required = ("expected", "got")
    optional = ()


class PreconditionFailedError(Refusal):
    """The ifGeneration or ifMatch precondition does not hold."""

    status = 412
    required = ("expected", "actual")
    optional = ()


class TransactionAbortedError(Refusal):
    """One op or item in an all-or-nothing batch was refused, so nothing was written."""

    status = 409
    required = ("index", "error")
    optional = ()


class AggregateNotFoundError(Refusal):
    """No aggregate is defined under that name."""

    status = 404
    required = ("aggregate",)
    optional = ()


class ImportFormatError(Refusal):
    """The import content does not parse as the declared format."""

    status = 422
    required = ("reason",)
    optional = ("line",)


# Time and the log
class GenerationAheadError(Refusal):
    """A generation past the brain's head."""

    status = 400
    required = ("generation", "head")
    optional = ()


class GenerationCompactedError(Refusal):
    """That generation is no longer retained."""

    status = 410
    required = ("generation", "oldestRetained")
    optional = ()


class NoFactLogError(Refusal):
    """The store has no fact log to read changes from."""

    status = 409
    required = ()
    optional = ()


class FactLogRefusedError(Refusal):
    """The log cannot be read as it stands: manifest-version, missing-segment, segment-order, torn-sealed-segment,
    v1-segment, unknown-record-type. The server never reads around the damage."""

    status = 409
    required = ("reason",)
    optional = ()


# Files
class FileNotFoundError(Refusal):
    """No such path (or, for a create, no such parent)."""

    status = 404
    required = ("path",)
    optional = ()


class FileExistsError(Refusal):
    """The target path already exists."""

    status = 409
    required = ("path",)
    optional = ()


class NotADirectoryError(Refusal):
    """A directory was needed, and a file is there."""

    status = 409
    required = ("path",)
    optional = ()


class IsADirectoryError(Refusal):
    """A file was needed, and a directory is there."""

    status = 409
    required = ("path",)
    optional = ()


class DirectoryNotEmptyError(Refusal):
    """rmdir without recursive on a directory that is not empty."""

    status = 409
    required = ("path",)
    optional = ()


class InvalidPathError(Refusal):
    """The path is not absolute and normalised, is too long, or would move a directory into itself."""

    status = 400
    required = ("path", "reason")
    optional = ()


class TextDecodeError(Refusal):
    """The bytes are not valid UTF-8 from offset onward."""

    status = 422
    required = ("offset", "cure")
    optional = ()


class BlobCorruptError(Refusal):
    """The stored bytes do not hash to their address. They are reported as corruption and never served."""

    status = 500
    required = ("address", "path")
    optional = ()


# Model and language
class EmbeddingModelMissingError(Refusal):
    """No embedding model files were found. searched lists every place that was checked."""

    status = 503
    required = ("searched",)
    optional = ()


class LanguageProviderUnavailableError(Refusal):
    """A door needs generated text (e.g. memory.abstract without text), and no language provider is configured."""

    status = 503
    required = ()
    optional = ()


# Profiles
class RecordNotFoundError(Refusal):
    """No profile record has that id. For a bare accords id, probed lists the prefixed forms that were tried."""

    status = 404
    required = ("id",)
    optional = ("probed",)


class RecordAmbiguousError(Refusal):
    """A bare accords id matches records of several kinds."""

    status = 409
    required = ("ids",)
    optional = ()


class RecordStateError(Refusal):
    """The record's state forbids this (closed, already retired, not a proposal, not yours, seq conflict)."""

    status = 409
    required = ("state", "reason")
    optional = ("expected", "actual")


class MandateAmbiguousError(Refusal):
    """Accords rule A1: more than one live mandate."""

    status = 409
    required = ("ids",)
    optional = ()


class TimelineCorruptError(Refusal):
    """Rule A2: a timeline's positions are not one gap-free range."""

    status = 500
    required = ("expected", "found")
    optional = ()


class PolicyLockedError(Refusal):
    """The rule is locked, or the board is frozen. The owner must policy.unlock first."""

    status = 423
    required = ("rule", "frozen")
    optional = ()


# Host
class SnapshotRootNotConfiguredError(Refusal):
    """host.persist on a server started without --snapshots-dir. Every other door still serves."""

    status = 503
    required = ()
    optional = ()


class SnapshotRootUnusableError(Refusal):
    """The snapshots root is the brains directory, or is inside it, or contains it."""

    status = 409
    required = ()
    optional = ()


class SnapshotNameInvalidError(Refusal):
    """The snapshot name is not one legal segment."""

    status = 400
    required = ("snapshot",)
    optional = ()


class SnapshotTargetUnsafeError(Refusal):
    """The brain folder or the target is a symlink."""

    status = 409
    required = ()
    optional = ()


class SnapshotTargetNotEmptyError(Refusal):
    """The target already holds files."""

    status = 409
    required = ()
    optional = ()


class SnapshotRunNotFoundError(Refusal):
    """No backup run by that name."""

    status = 404
    required = ("snapshot",)
    optional = ()


class KeyLineRefusedError(Refusal):
    """The key line a mint would append fails the keys-file parser, so nothing is written."""

    status = 422
    required = ("reason",)
    optional = ()


class SignInModuleUnavailableError(Refusal):
    """--sign-in MODULE was given, but MODULE will not import or exposes no create_sign_in (the default is brainy's
    own module)."""

    status = None
    required = ("module",)
    optional = ()


class FleetNotConfiguredError(Refusal):
    """host.move on a server started without --fleet. Every other door still serves."""

    status = 503
    required = ()
    optional = ()


class NodeUnknownError(Refusal):
    """No live node of the fleet has that name."""

    status = 404
    required = ("node",)
    optional = ()


class BrainMovedError(Refusal):
    """This process no longer owns the brain: it was moved or failed over to node at epoch. A fenced write is refused
    with it and nothing is appended; a proxying node retries at the new owner instead."""

    status = 409
    required = ("brain", "node", "epoch")
    optional = ()


__all__ = [
    "BRAINY_KEY_BAD_SIGNATURE",
    "BRAINY_KEY_BRAIN",
    "BRAINY_KEY_EXPIRED",
    "BRAINY_KEY_MALFORMED",
    "BRAINY_KEY_REVOKED",
    "BRAINY_KEY_SCOPE",
    "BRAINY_KEY_UNKNOWN_ISSUER",
    "BRAINY_WRITER_LOCKED",
    "REGISTRY",
    "AccordsHostCannotWriteError",
    "AggregateNotFoundError",
    "BadQueryParameterError",
    "BinaryFrameError",
    "BlobCorruptError",
    "BodyDecodeError",
    "BrainArchivedError",
    "BrainExistsError",
    "BrainMovedError",
    "BrainNameInvalidError",
    "BrainsDirNotConfiguredError",
    "CallerAssertionRefusedError",
    "ControlFrameTooLargeError",
    "CursorInvalidError",
    "DimensionMismatchError",
    "DirectoryNotEmptyError",
    "EmbeddingModelMissingError",
    "EntityExistsError",
    "EntityNotFoundError",
    "FactLogRefusedError",
    "FileExistsError",
    "FileNotFoundError",
    "FleetNotConfiguredError",
    "ForbiddenError",
    "FragmentedFrameError",
    "FrameTooLargeError",
    "GenerationAheadError",
    "GenerationCompactedError",
    "GuardrailOwnerCredentialUnavailableError",
    "GuardrailOwnerScopeRequiredError",
    "GuardrailRefusedError",
    "HeaderTooLargeError",
    "ImportFormatError",
    "InProcessOnlyError",
    "IndexNotAttachedError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidPathError",
    "IsADirectoryError",
    "KeyLineRefusedError",
    "LanguageProviderUnavailableError",
    "MalformedRequestError",
    "MandateAmbiguousError",
    "MemoryHostCannotWriteError",
    "MethodNotAllowedError",
    "NoFactLogError",
    "NoSuchBrainError",
    "NodeUnknownError",
    "NotADirectoryError",
    "NotYetNativeError",
    "OrderBudgetExceededError",
    "OwnerRungRequiredError",
    "PayloadTooLargeError",
    "PolicyLockedError",
    "PolicyOwnerScopeRequiredError",
    "PreconditionFailedError",
    "ProjectionBehindError",
    "ProtocolVersionError",
    "RecordAmbiguousError",
    "RecordNotFoundError",
    "RecordStateError",
    "Refusal",
    "RelationNotFoundError",
    "ReservedBitError",
    "ServiceKeyCannotWriteError",
    "ShuttingDownError",
    "SignInModuleUnavailableError",
    "SnapshotNameInvalidError",
    "SnapshotRootNotConfiguredError",
    "SnapshotRootUnusableError",
    "SnapshotRunNotFoundError",
    "SnapshotTargetNotEmptyError",
    "SnapshotTargetUnsafeError",
    "StoreNotFoundError",
    "StoreUnservableError",
    "TextDecodeError",
    "TimelineCorruptError",
    "TransactionAbortedError",
    "TransportNotWiredError",
    "UnauthenticatedError",
    "UnknownDoorError",
    "UnmaskedFrameError",
    "UnsupportedMediaTypeError",
    "WriterFenceLostError",
    "by_name",
]

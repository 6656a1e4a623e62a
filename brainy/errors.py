"""Every refusal brainy names, as exception classes, and the one error a remote call raises when the
transport failed rather than the server refusing.

The embedded ``Brain`` and ``brainy.client`` raise the same classes, so one ``except`` serves both::

    from brainy import errors
    try:
        b.get("missing-id")
    except errors.EntityNotFoundError as refused:
        print(refused.name, refused.status, refused.fields)

Each refusal carries ``.name``, ``.status``, ``.message`` and every field of the refusal, as attributes and in
``.fields``. Several names (``FileNotFoundError``, ``FileExistsError``, ``NotADirectoryError``,
``IsADirectoryError``) shadow Python builtins: import the module, not the names.
"""

from __future__ import annotations

from typing import Any

from brainy.contract.refusals import *  # noqa: F403  (the public names are the contract's)
from brainy.contract.refusals import REGISTRY, Refusal


class TransportError(Exception):
    """The request did not get an answer from the server: it could not connect, the connection dropped, the
    call timed out, or what came back was not brainy's wire. ``cause`` is the underlying error, ``url`` where it
    was going; nothing is known of whether a write that was sent committed."""

    def __init__(self, message: str, *, url: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.cause = cause


def from_wire(document: Any, status: int | None = None) -> Refusal:
    """The refusal a wire ``error`` document names, as its own class (its fields as sent, unchecked: a server of
    another contract version may send fields this one does not declare). A name this contract does not know
    comes back as the root ``Refusal`` with the name and status it was sent under."""
    if not isinstance(document, dict):
        document = {"name": "InternalError", "message": f"an error document that is not an object: {document!r}"}
    name = str(document.get("name", "InternalError"))
    cls = REGISTRY.get(name, Refusal)
    refusal = cls.__new__(cls)
    message = str(document.get("message", ""))
    Exception.__init__(refusal, message)
    refusal.message = message
    refusal.fields = {k: v for k, v in document.items() if k not in ("name", "message")}
    if cls is Refusal:
        refusal.name = name  # type: ignore[misc]
        refusal.status = status  # type: ignore[misc]
    return refusal

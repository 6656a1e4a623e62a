"""Malformed inputs on every transport of a real ``brainy serve`` (the issue "10,000 malformed inputs per
transport"), a few hundred each: tools/fuzz_transports.py's own code, at a count the suite can afford.

One server (h1 and h2, gRPC, HTTP/3) and one ``brainy mcp`` over stdio take 300 inputs per transport, drawn
from a seed: WebSocket frames and call frames, gRPC messages over raw HTTP/2 and grpcio, HTTP/3 frames over
QUIC, MCP JSON-RPC over HTTP and over stdio, and the change stream's resume headers. After every hundred the
process is alive, a valid request on the transport answers as it should, nothing answered a 500 (an
InternalError, JSON-RPC -32603, gRPC INTERNAL or UNKNOWN, an H3 or QUIC internal error), the log holds no
fault, and the resident set is sampled. tools/fuzz_transports.py runs 10,000 per transport.

Rerun a failure with ``BRAINY_FUZZ_SEED=<seed> pytest tests/test_fuzz_transports.py``, or the tool itself
with ``--seed``.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the inputs and their checks are tools/fuzz_transports.py's
    sys.path.insert(0, str(ROOT))

from tools import fuzz_transports as F  # noqa: E402

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("BRAINY_FUZZ_SEED") or random.SystemRandom().randrange(1 << 32))
COUNT = 300  # inputs per transport
BATCH = 100  # inputs between two checks


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[F.Target]:
    with F.serving(tmp_path_factory.mktemp("fuzz")) as served:
        yield served


@pytest.mark.parametrize("transport", F.TRANSPORTS)
def test_malformed_inputs_answer_by_name_and_the_server_goes_on(target: F.Target, transport: str) -> None:
    """Law: 300 malformed inputs on the transport crash nothing and answer no 500: each is answered, refused by
    its transport's own name (a refusal, a close code, a GOAWAY or CONNECTION_CLOSE naming its error), or
    waited on as the protocol allows; after every hundred the process is alive and a valid request on the
    same transport answers correctly; the server logs no fault; its resident set stays within the bound."""
    tally = asyncio.run(F.fuzz_transport(target, transport, COUNT, SEED, BATCH))
    context = f"seed={SEED} transport={transport}\n{F.table([tally])}"
    assert tally.sent == COUNT, context
    assert tally.internal == 0, context
    assert not tally.faults and tally.logged == 0, context
    assert tally.probes == COUNT // BATCH, context
    assert target.alive(), context
    assert sum(tally.answers.values()) + sum(tally.server_closed.values()) > 0, context

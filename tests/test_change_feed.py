"""The held change stream's parts, without a server: the sans-IO :class:`~brainy.net.sse.ChangeStream` on a
fake clock, the resume rule, and the log tail (brainy/doors/feed.py) over a real store whose log another
handle writes (seed 001, "The change feed"; STYLE 12: a torn tail is not corruption).
"""

from __future__ import annotations

import pytest

from brainy.contract import refusals as R
from brainy.doors import feed
from brainy.doors.feed import LogTail
from brainy.engine import Brain, init_store
from brainy.net import sse
from brainy.store import log as log_


def test_the_tick_and_the_heartbeat():
    """A held stream is due a drain every 2 s whatever woke it, and sends a heartbeat comment after 15 s of
    silence; frames sent reset the heartbeat, not the tick's rhythm of drains."""
    stream = sse.ChangeStream("notes", 0, 100.0, held=True, source="commits")
    stream.catch_up_done(False, 0.1, 100.0)
    assert stream.data_to_send().startswith(b"event: caught-up\ndata: {")
    assert stream.next_deadline() == 102.0
    assert stream.timer_fired(102.0) is True and stream.data_to_send() == b""
    stream.commits_landed([], 102.0)
    assert stream.next_deadline() == 104.0
    for now in (104.0, 106.0, 108.0, 110.0, 112.0, 114.0):
        stream.timer_fired(now)
        stream.commits_landed([], now)
    assert stream.data_to_send() == b""
    stream.timer_fired(115.0)
    assert stream.data_to_send() == b":\n\n"
    frame = {"generation": 3, "index": 0, "kind": "entity", "op": "delete", "id": "a"}
    stream.commits_landed([[frame]], 116.0)
    assert stream.data_to_send().startswith(b"id: 3.0\nevent: change\ndata: ") and stream.cursor == 3
    assert stream.next_deadline() == 118.0


def test_a_limited_stream_ends_after_its_page_and_damage_ends_it_by_name():
    """With a limit the stream is a page: caught-up, then the end. The log's damage mid-stream is an error
    event naming the refusal, then the end."""
    page = sse.ChangeStream("notes", 0, 0.0, held=True, source="commits", limit=5)
    page.catch_up_done(True, 0.1, 0.0)
    assert page.ended and page.live_tail["held"] is False and page.next_deadline() is None
    held = sse.ChangeStream("notes", 0, 0.0, held=True, source="commits")
    held.refused(R.FactLogRefusedError("damaged", reason="checksum-mismatch"))
    assert held.ended and b'"name":"FactLogRefusedError"' in held.data_to_send()


def test_resume_lands_on_a_commit_boundary():
    """Last-Event-ID wins over since: after a commit's last op it resumes after the commit, inside one at its
    start; since past the head, a malformed id, and a limit that is not a positive integer refuse."""
    ops = {4: 3, 5: 1}.get
    assert feed.resume_cursor("4.2", 0, 5, ops) == 4
    assert feed.resume_cursor("4.0", 5, 5, ops) == 3
    assert feed.resume_cursor(None, "head", 5, ops) == 5
    assert feed.resume_cursor("", 2, 5, ops) == 2
    for bad_id, since in [(None, 6), ("9.0", 0), ("4", 0), ("x.1", 0)]:
        with pytest.raises(R.BadQueryParameterError) as refused:
            feed.resume_cursor(bad_id, since, 5, ops)
        assert refused.value.fields["head"] == 5
    for limit in (0, -1, True, 1.5):
        with pytest.raises(R.BadQueryParameterError):
            feed.check_limit(limit)
    assert feed.check_limit(None) is None and feed.check_limit(3) == 3


@pytest.mark.parametrize(
    "bad_id",
    [
        "\u00b2.0",  # a superscript two: str.isdigit says yes, int says no (once a 500, found by fuzzing)
        "1.\u00b9",
        "\u0663.\u0660",  # Arabic-Indic digits
        "\uff14.\uff10",  # fullwidth digits
        "9" * 5000 + ".0",  # past the 4,300 digits int reads (once a 500)
        "1." + "9" * 5000,
        "9" * 21 + ".0",
        "-1.0",
        "+4.0",
        "4.0.0",
        " 4 .0",
    ],
)
def test_a_last_event_id_not_of_ascii_digits_refuses_by_name(bad_id):
    """Law: a Last-Event-ID is two runs of ASCII digits, each at most 20 long (a generation is at most 2^64);
    anything else is BadQueryParameterError naming the header, with the head, never a fault."""
    with pytest.raises(R.BadQueryParameterError) as refused:
        feed.resume_cursor(bad_id, 0, 5, {4: 3, 5: 1}.get)
    assert refused.value.fields["param"] == "Last-Event-ID" and refused.value.fields["head"] == 5


def test_a_frame_not_yet_whole_is_not_landed_and_never_refuses(tmp_path):
    """An attach's tail reads the frames another handle appends; a frame cut short at the end of the log is
    not landed yet (nothing, no refusal), and once its bytes are all there the next drain delivers it."""
    init_store(tmp_path / "s")
    writer = Brain.open(tmp_path / "s")
    try:
        first = writer.add({"type": "document", "metadata": {"tags": ["t"]}})
        reader = Brain.attach(tmp_path / "s")
        tail = LogTail(tmp_path / "s", reader.head)
        assert tail.drain(reader) == ([], False)
        segment = sorted((tmp_path / "s" / "log").iterdir())[-1]
        frame = next(log_.frames(segment.parent, 0))
        payload = log_.encode_payload(2, frame.timestamp + 1, None, None, frame.ops)
        torn = log_.encode_frame(payload)
        with open(segment, "ab") as out:
            out.write(torn[: len(torn) // 2])
        assert tail.drain(reader) == ([], False)
        with open(segment, "ab") as out:
            out.write(torn[len(torn) // 2 :])
        commits, more = tail.drain(reader)
        assert [[(f["generation"], f["index"], f["id"]) for f in c] for c in commits] == [[(2, 0, first["id"])]]
        assert commits[0][0]["entity"]["metadata"] == {"tags": ["t"]} and more is False
        reader.close()
    finally:
        writer.close()


def test_damage_in_the_log_refuses_by_name(tmp_path):
    """A whole frame whose checksum fails is damage, refused FactLogRefusedError (never read around); a store
    without a log is NoFactLogError."""
    init_store(tmp_path / "s")
    writer = Brain.open(tmp_path / "s")
    try:
        writer.add({"type": "document"})
        reader = Brain.attach(tmp_path / "s")
        tail = LogTail(tmp_path / "s", reader.head)
        tail.drain(reader)
        segment = sorted((tmp_path / "s" / "log").iterdir())[-1]
        bad = bytearray(log_.encode_frame(b"\x85\xa1g\x02" + b"x" * 20))
        bad[-1] ^= 0xFF
        with open(segment, "ab") as out:
            out.write(bytes(bad) + log_.encode_frame(b"\x85\xa1g\x03"))
        with pytest.raises(R.FactLogRefusedError):
            tail.drain(reader)
        with pytest.raises(R.NoFactLogError):
            LogTail(tmp_path / "nowhere", 0).drain(reader)
        reader.close()
    finally:
        writer.close()

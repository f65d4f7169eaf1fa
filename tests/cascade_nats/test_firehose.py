"""The firehose's ordered-consumer rules on what arrives, message by message."""

from __future__ import annotations

import pytest
from nats.aio.client import Client

from cascade_nats.connect import beside
from cascade_nats.firehose import Firehose
from cascade_nats.wire import Message

SID = b"7"


def firehose(nc: Client | None = None) -> Firehose:
    hose = Firehose(nc, "CASCADE", "cascade.ev.>", 1)  # type: ignore[arg-type]  # no request is made: only what arrived is sorted out
    hose._sid = SID
    return hose


def stored(sseq: int, cseq: int, pending: int, *, sid: bytes = SID, domain: bool = False) -> Message:
    ack = f"$JS.ACK.hub.ACCOUNT.CASCADE.c1.1.{sseq}.{cseq}.1701234567890123456.{pending}.tok" if domain else f"$JS.ACK.CASCADE.c1.1.{sseq}.{cseq}.1701234567890123456.{pending}"
    return (sid, f"cascade.ev.run.r.sim.s{sseq}.data".encode(), ack.encode(), 0, f'{{"n":{sseq}}}'.encode())


def heartbeat(last_delivered: int) -> Message:
    header = f"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: {last_delivered}\r\nNats-Last-Stream: 99\r\n\r\n".encode()
    return (SID, b"_INBOX.x", b"", len(header), header)


def test_messages_in_order_are_frames_with_the_last_ones_pending_count() -> None:
    hose = firehose()
    frames, pending, gap = hose._take([stored(10, 1, 2), stored(12, 2, 1, domain=True), stored(13, 3, 0, sid=b"6"), stored(13, 3, 0)])
    assert frames == [(10, b"cascade.ev.run.r.sim.s10.data", b'{"n":10}'), (12, b"cascade.ev.run.r.sim.s12.data", b'{"n":12}'), (13, b"cascade.ev.run.r.sim.s13.data", b'{"n":13}')]
    assert (pending, gap, hose.next_seq, hose._consumer_seq) == (0, False, 14, 3)
    frames, pending, gap = hose._take([stored(14, 4, 0)])  # going on where the last read stopped
    assert ([f[0] for f in frames], gap, hose.next_seq) == ([14], False, 15)


def test_a_missed_message_stops_the_read_where_it_was_missed() -> None:
    hose = firehose()
    frames, pending, gap = hose._take([stored(10, 1, 5), stored(11, 2, 4), stored(13, 4, 2), stored(14, 5, 1)])
    assert ([f[0] for f in frames], pending, gap) == ([10, 11], 2, True)
    assert (hose.next_seq, hose._consumer_seq) == (12, 2)  # the consumer is made again from there


@pytest.mark.anyio
async def test_a_heartbeat_is_checked_against_what_was_delivered_before_it(nc: Client) -> None:
    hose = firehose(nc)
    hose._wire = await beside(nc)  # what control messages are answered on
    try:
        assert hose._take([stored(10, 1, 0), stored(11, 2, 0), heartbeat(2)])[2] is False
        assert hose._take([heartbeat(3)])[2] is True  # the server delivered one this consumer never saw
        assert hose._take([])[:2] == ([], -1)
    finally:
        hose._wire.close()

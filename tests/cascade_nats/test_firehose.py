"""The firehose's ordered-consumer rules on what arrives, message by message, and the same
rules kept by its C fast path (`_frames.take`) on the bytes as they arrive."""

from __future__ import annotations

import contextlib

import pytest
from nats.aio.client import Client

from cascade_nats.connect import beside
from cascade_nats.firehose import Firehose
from cascade_nats.store import EventStore
from cascade_nats.wire import Message

SID = b"7"


def firehose(nc: Client | None = None) -> Firehose:
    hose = Firehose(nc=nc, stream="CASCADE", subject="cascade.ev.>", start_seq=1)  # type: ignore[arg-type]  # no request is made: only what arrived is sorted out
    hose._sid = SID
    return hose


def stored(sseq: int, cseq: int, pending: int, *, sid: bytes = SID, domain: bool = False) -> Message:
    ack = f"$JS.ACK.hub.ACCOUNT.CASCADE.c1.1.{sseq}.{cseq}.1701234567890123456.{pending}.tok" if domain else f"$JS.ACK.CASCADE.c1.1.{sseq}.{cseq}.1701234567890123456.{pending}"
    return (sid, f"cascade.ev.run.r.sim.s{sseq}.data".encode(), ack.encode(), 0, f'{{"n":{sseq}}}'.encode())


def stored_with_header(sseq: int, cseq: int, pending: int, *, domain: bool = False) -> Message:
    """A stream message as the store appends them: with its Nats-Msg-Id header."""
    header = f"NATS/1.0\r\nNats-Msg-Id: e{sseq}\r\n\r\n".encode()
    sid, subject, reply, _, body = stored(sseq, cseq, pending, domain=domain)
    return sid, subject, reply, len(header), header + body


def wire_bytes(message: Message) -> bytes:
    """A message as the server sends it."""
    sid, subject, reply, header_length, body = message
    head = b" ".join([b"HMSG" if header_length else b"MSG", subject, sid, *([reply] if reply else []), *([str(header_length).encode()] if header_length else []), str(len(body)).encode()])
    return head + b"\r\n" + body + b"\r\n"


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


async def received_in_pieces(nc: Client, data: bytes, piece: int) -> tuple[list[tuple[int, bytes, bytes]], int, bool, Firehose]:
    """What the firehose takes of `data` arriving `piece` bytes at a time, until a gap."""
    hose = firehose(nc)
    hose._wire = wire = await beside(nc)  # what pings and control messages are answered on
    try:
        frames: list[tuple[int, bytes, bytes]] = []
        pending, gap = -1, False
        for start in range(0, len(data), piece):
            wire.buffer, wire.pos = wire.buffer[wire.pos :] + data[start : start + piece], 0
            batch, batch_pending, gap = hose._received()
            frames += batch
            pending = batch_pending if batch_pending >= 0 else pending
            if gap:
                break
        return frames, pending, gap, hose
    finally:
        wire.close()


@pytest.mark.anyio
async def test_the_bytes_as_they_arrive_give_the_frames_the_messages_give(nc: Client) -> None:
    messages = [
        stored_with_header(10, 1, 5), stored(11, 2, 4), stored(40, 3, 3, sid=b"6"), heartbeat(2), stored_with_header(12, 3, 3, domain=True),
        stored_with_header(13, 4, 2), heartbeat(4), stored(14, 5, 0),
    ]  # fmt: skip
    data = b"PING\r\n".join(map(wire_bytes, messages))
    expected = firehose()._take([m for m in messages if m[3] == 0 or not m[4].startswith(b"NATS/1.0 100")])
    for piece in (1, 7, 64, len(data)):
        frames, pending, gap, hose = await received_in_pieces(nc, data, piece)
        assert (frames, pending, gap) == expected, piece
        assert (hose.next_seq, hose._consumer_seq) == (15, 5)


@pytest.mark.anyio
async def test_a_missed_message_stops_the_bytes_where_it_was_missed(nc: Client) -> None:
    data = b"".join(map(wire_bytes, [stored_with_header(10, 1, 5), stored_with_header(11, 2, 4), stored_with_header(13, 4, 2), stored(14, 5, 1)]))
    for piece in (5, len(data)):
        frames, pending, gap, hose = await received_in_pieces(nc, data, piece)
        assert ([f[0] for f in frames], pending, gap) == ([10, 11], 4, True)
        assert (hose.next_seq, hose._consumer_seq) == (12, 2)


@pytest.mark.anyio
async def test_a_heartbeat_that_says_more_was_delivered_is_a_gap_in_the_bytes_too(nc: Client) -> None:
    frames, _, gap, _ = await received_in_pieces(nc, b"".join(map(wire_bytes, [stored(10, 1, 0), heartbeat(2), stored(11, 2, 0)])), 1000)
    assert ([f[0] for f in frames], gap) == ([10], True)


@pytest.mark.anyio
async def test_a_connection_the_server_drops_is_taken_up_again_where_the_last_batch_ended(store: EventStore, nc: Client) -> None:
    """A reader that pauses long enough is dropped by the server as a slow consumer (replay
    did, under load); the firehose dials again and the new consumer starts after the last
    message yielded: every message once, in order."""
    js = nc.jetstream()
    payload = b"x" * 2048  # 8 MB in all: more than one read of the wire takes
    acks = [await js.publish(f"cascade.ev.run.r{i % 7}.data", payload) for i in range(4000)]
    seqs: list[int] = []
    hose = Firehose(nc=nc, stream=store.stream, subject=">", start_seq=1)
    async with contextlib.aclosing(hose.batches(until_caught_up=True)) as batches:
        async for batch in batches:
            if not seqs:
                assert hose._wire is not None and batch[-1][0] < acks[-1].seq, "the first read took everything: nothing to drop"
                hose._wire.writer.transport.abort()  # as the server's close of a slow consumer looks to the reader
                dropped = hose._wire
            seqs += [seq for seq, _, _ in batch]
    assert seqs == [ack.seq for ack in acks]
    assert hose._wire is not dropped

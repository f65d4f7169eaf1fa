from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator

import pytest
from nats.aio.client import Client

from cascade_nats.objects import CHUNK_SIZE, ObjectMissing, Objects

pytestmark = pytest.mark.anyio


async def pieces(data: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


@pytest.fixture
async def objects(nc: Client) -> AsyncIterator[Objects]:
    o = Objects(nc)
    await o.ensure()
    yield o
    await o.close()


@pytest.mark.parametrize("size", [0, 1, CHUNK_SIZE, CHUNK_SIZE * 3 + 17])
async def test_streams_in_and_out_unchanged(objects: Objects, size: int) -> None:
    data = os.urandom(size)
    stored = await objects.put("accelsim-traces/demo/kernel-1.traceg", pieces(data, 5000))
    assert stored.size == size
    assert await objects.read_all("accelsim-traces/demo/kernel-1.traceg") == data
    # nats-py reads the same object, digest checked
    result = await objects.store.get("accelsim-traces/demo/kernel-1.traceg")
    assert (result.data or b"") == data


async def test_replacing_an_object_drops_its_old_chunks(objects: Objects) -> None:
    await objects.put("f", pieces(b"a" * CHUNK_SIZE * 2, 4096))
    await objects.put("f", pieces(b"b" * 10, 4096))
    assert await objects.read_all("f") == b"b" * 10
    info = await objects.js.stream_info(objects.stream)
    assert info.state.messages == 2  # one chunk and one meta message


async def test_a_failing_source_stores_nothing(objects: Objects) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b"x" * CHUNK_SIZE * 2
        raise ConnectionResetError("client went away")

    with pytest.raises(ConnectionResetError):
        await objects.put("partial", broken())
    assert await objects.stat("partial") is None
    info = await objects.js.stream_info(objects.stream)
    assert info.state.messages == 0


async def test_delete_and_prefix_delete(objects: Objects) -> None:
    for name in ("accelsim-traces/a/x", "accelsim-traces/a/y", "accelsim-traces/b/x"):
        await objects.put(name, pieces(name.encode(), 3))
    assert await objects.delete_prefix("accelsim-traces/a/") == 2
    with pytest.raises(ObjectMissing):
        await objects.read_all("accelsim-traces/a/x")
    assert await objects.read_all("accelsim-traces/b/x") == b"accelsim-traces/b/x"


async def test_digest_is_sha256_of_content(objects: Objects) -> None:
    import base64

    stored = await objects.put("d", pieces(b"hello", 2))
    assert stored.digest == "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(b"hello").digest()).decode()


async def test_an_object_larger_than_what_nats_server_holds_waiting_is_stored(objects: Objects) -> None:
    # nats-server refuses a stream's messages ("too many requests") once 128 MiB of them wait
    # to be stored; a 5 GB log's object had 1 GiB in flight and was refused on every try.
    piece = os.urandom(1 << 20)
    size = 192 << 20

    async def source() -> AsyncIterator[bytes]:
        for _ in range(size >> 20):
            yield piece

    stored = await objects.put("sims/big/1/accelsim.log.gz", source())
    assert stored.size == size
    sha = hashlib.sha256()
    async for chunk in objects.read("sims/big/1/accelsim.log.gz"):
        sha.update(chunk)
    assert sha.digest() == hashlib.sha256(piece * (size >> 20)).digest()

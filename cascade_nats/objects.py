"""Files in a JetStream Object Store bucket, streamed both ways.

nats-py's object store reads a whole object into memory and publishes one awaited chunk at a
time. Traces are gigabytes, so this writes the same on-the-wire format (chunks on
`$O.<bucket>.C.<nuid>`, then the meta message with its SHA-256 digest) from an async stream of
bytes with chunks pipelined, and reads chunks back as they arrive, checking the digest at the
end. Any NATS client's object store can read what this writes, and the reverse.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from collections.abc import AsyncGenerator, AsyncIterable
from datetime import UTC, datetime

import msgspec
import nats.js.api as api
import nats.js.errors
from nats.aio.client import Client
from nats.js.object_store import ObjectStore

from cascade_core.object_names import digest
from cascade_host import new_ids
from cascade_nats.firehose import Firehose
from cascade_nats.pipeline import Pipeline
from cascade_nats.replicas import scale

BUCKET = "cascade"
CHUNK_SIZE = 128 * 1024


class ObjectMissing(KeyError):
    pass


class DigestMismatch(ValueError):
    pass


class StoredObject(msgspec.Struct, frozen=True):
    name: str
    size: int
    digest: str  # "SHA-256=<base64url>", as the object store writes it


class Objects:
    def __init__(self, nc: Client, bucket: str = BUCKET) -> None:
        self.nc = nc
        self.bucket = bucket
        self.stream = f"OBJ_{bucket}"
        self.js = nc.jetstream(timeout=10.0)
        self.pipeline = Pipeline(nc)
        self._store: ObjectStore | None = None

    async def close(self) -> None:
        await self.pipeline.close()

    async def ensure(self, replicas: int | None = None) -> None:
        """Create the bucket, or scale an existing one up to `replicas` (`replicas.scale`)."""
        try:
            self._store = await self.js.object_store(self.bucket)
        except nats.js.errors.BucketNotFoundError:
            config = api.ObjectStoreConfig(bucket=self.bucket, storage=api.StorageType.FILE, replicas=replicas or 1)
            self._store = await self.js.create_object_store(self.bucket, config=config)
        else:
            await scale(self.js, self.stream, replicas)

    @property
    def store(self) -> ObjectStore:
        assert self._store is not None, "call ensure() first"
        return self._store

    async def put(self, name: str, data: AsyncIterable[bytes], *, content_type: str | None = None) -> StoredObject:
        """Store everything `data` yields under `name`, replacing any object of that name.
        If `data` raises, the chunks sent so far are removed and nothing is stored."""
        nuid = new_ids.object_chunks_id()
        chunk_subject = f"$O.{self.bucket}.C.{nuid}"
        sha = hashlib.sha256()
        size = chunks = 0
        batch = await self.pipeline.batch(timeout=30.0)
        pending = bytearray()
        try:
            async for piece in data:
                pending += piece
                while len(pending) >= CHUNK_SIZE:
                    chunk = bytes(pending[:CHUNK_SIZE])
                    del pending[:CHUNK_SIZE]
                    sha.update(chunk)
                    await batch.publish(chunk_subject, chunk)
                    size += len(chunk)
                    chunks += 1
            if pending:
                sha.update(pending)
                await batch.publish(chunk_subject, bytes(pending))
                size += len(pending)
                chunks += 1
            await batch.done()
        except BaseException:
            # Chunks still in flight would land after the purge: let them be stored first.
            with contextlib.suppress(Exception):
                await batch.done()
            await self._purge(chunk_subject)
            raise
        finally:
            self.pipeline.release(batch)
        previous = await self._info(name)
        stored = StoredObject(name, size, digest(sha))
        meta = {
            "name": name,
            "bucket": self.bucket,
            "nuid": nuid,
            "size": size,
            "chunks": chunks,
            "digest": stored.digest,
            "mtime": datetime.now(UTC).isoformat(),
            "options": {"max_chunk_size": CHUNK_SIZE},
        }
        if content_type:
            meta["headers"] = {"Content-Type": [content_type]}
        await self.js.publish(
            self._meta_subject(name), json.dumps(meta).encode(), stream=self.stream, headers={"Nats-Rollup": "sub"}
        )
        if previous is not None and previous.nuid != nuid and not previous.deleted:
            await self._purge(f"$O.{self.bucket}.C.{previous.nuid}")
        return stored

    async def read(self, name: str) -> AsyncGenerator[bytes, None]:
        """The object's bytes as they arrive; raises DigestMismatch at the end if they do not
        add up to what was stored."""
        info = await self._info(name)
        if info is None or info.deleted:
            raise ObjectMissing(name)
        if not info.size:
            return
        sha = hashlib.sha256()
        firehose = Firehose(nc=self.nc, stream=self.stream, subject=f"$O.{self.bucket}.C.{info.nuid}", start_seq=1)
        # Closed with this generator, however its reader stops: it holds a connection.
        async with contextlib.aclosing(firehose.batches(until_caught_up=True)) as batches:
            async for batch in batches:
                for _, _, chunk in batch:
                    sha.update(chunk)
                    yield chunk
        if digest(sha) != info.digest:
            raise DigestMismatch(f"{name}: stored digest {info.digest}, read {digest(sha)}")

    async def read_all(self, name: str) -> bytes:
        return b"".join([chunk async for chunk in self.read(name)])

    async def stat(self, name: str) -> StoredObject | None:
        info = await self._info(name)
        if info is None or info.deleted:
            return None
        return StoredObject(name, info.size or 0, info.digest or "")

    async def delete(self, name: str) -> None:
        try:
            await self.store.delete(name)
        except nats.js.errors.NotFoundError:
            pass

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every object whose name starts with `prefix`; returns how many."""
        try:
            infos = await self.store.list()
        except nats.js.errors.NotFoundError:
            return 0
        names = [i.name for i in infos if i.name.startswith(prefix) and not i.deleted]
        for name in names:
            await self.delete(name)
        return len(names)

    async def _info(self, name: str) -> api.ObjectInfo | None:
        try:
            return await self.store.get_info(name, show_deleted=True)
        except nats.js.errors.NotFoundError:
            return None

    async def _purge(self, subject: str) -> None:
        await self.js.purge_stream(self.stream, subject=subject)

    def _meta_subject(self, name: str) -> str:
        return f"$O.{self.bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"

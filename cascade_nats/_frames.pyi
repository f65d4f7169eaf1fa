MORE: int
OTHER: int
GAP: int

def take(buffer: bytes, pos: int, sid: bytes, delivered: int, frames: list[tuple[int, bytes, bytes]], /) -> tuple[int, int, int, int]: ...

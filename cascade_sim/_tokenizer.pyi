from collections.abc import Callable

def stats(
    text: str,
    start: int,
    end: int,
    kernel_name: str,
    names_of: Callable[[str], tuple[str | None, ...]],
    nonfinite: type[float],
    /,
) -> dict[str, float | str]: ...
def find(text: str, sub: str, start: int, /) -> int: ...
def pack(stats: dict[str, float | str], /) -> tuple[bytes, dict[int, str | None]]: ...

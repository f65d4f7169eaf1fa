from collections.abc import Callable
from typing import Protocol, TypeVar

class _Layout(Protocol):
    @property
    def names(self) -> tuple[str, ...]: ...
    @property
    def slots(self) -> bytes: ...

_L = TypeVar("_L", bound=_Layout)

def stats(
    text: str,
    start: int,
    end: int,
    kernel_name: str,
    layout_of: Callable[[str], _L],
    /,
) -> tuple[_L, bytes, dict[int, str]]: ...
def find(text: str, sub: str, start: int, /) -> int: ...
def lines(text: str, /) -> int: ...

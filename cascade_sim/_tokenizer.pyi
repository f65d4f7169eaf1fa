from collections.abc import Callable

def stats(
    text: str, kernel_name: str, names_of: Callable[[str], tuple[str | None, ...]], nonfinite: type[float], /
) -> dict[str, float | str]: ...

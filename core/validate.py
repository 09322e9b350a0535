"""Argument validation at the edges: pydantic errors become one ``UserError`` naming key and file.

``bounded(most)`` is the shared upper bound of a size (users, months,
sessions, turns, tick rates): a value past it is refused up front, before a
run tries to allocate or play it, unless ``$MEMSIM_NO_SIZE_LIMITS`` is set
(``memsim --no-size-limits``). A size must be finite either way.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from pydantic import AfterValidator, BaseModel, ValidationError

from memsim.core.errors import UserError

__all__ = ["validate_args", "bounded", "size_limits_on", "NO_SIZE_LIMITS_ENV"]

NO_SIZE_LIMITS_ENV = "MEMSIM_NO_SIZE_LIMITS"
"""Set (to anything but empty or ``0``) to accept sizes past their bounds."""


def size_limits_on() -> bool:
    """Whether sizes are held to their upper bounds (``$MEMSIM_NO_SIZE_LIMITS`` unset)."""
    return os.environ.get(NO_SIZE_LIMITS_ENV, "") in ("", "0")


def bounded(most: float = math.inf, *, least: float = 0.0) -> AfterValidator:
    """A pydantic validator for ``Annotated[...]``: the value is finite and at most ``most``.

    The bounds are lifted by ``--no-size-limits``; a non-finite value
    (``inf``, ``nan``) is refused always.

    Args:
        most: the largest value accepted while limits are on.
        least: the smallest value above zero accepted while limits are on
            (an interval: 0 keeps its meaning "never", 1e-9 hours is refused).
    """

    def check(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"must be a finite number, got {value}")
        if value is None or not size_limits_on():
            return value
        if value > most:
            raise ValueError(f"{value} is past the sane upper bound {most:g} (memsim --no-size-limits lifts it)")
        if 0 < value < least:
            raise ValueError(f"{value} is below the sane lower bound {least:g} (0: none; memsim --no-size-limits lifts it)")
        return value

    return AfterValidator(check)


def validate_args(model: type[BaseModel], args: Mapping[str, Any], *, what: str, source: str) -> BaseModel:
    """Validate ``args`` with ``model``; errors name the key and the source file."""
    where = f" in {source}" if source else ""
    if not isinstance(args, Mapping):
        raise UserError(f"bad {what} configuration{where}: expected a table of keys, got {type(args).__name__} {args!r}")
    try:
        return model(**dict(args))
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(arguments)"
            msg = err["msg"].removeprefix("Value error, ")
            parts.append(f"{what}.{key}: {msg}")
        raise UserError(f"bad {what} configuration{where}: " + "; ".join(parts)) from None

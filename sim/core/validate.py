"""Argument validation at the edges: pydantic errors become one ``UserError`` naming key and file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from memsim.sim.core.errors import UserError

__all__ = ["validate_args"]


def validate_args(model: type[BaseModel], args: Mapping[str, Any], *, what: str, source: str) -> BaseModel:
    """Validate ``args`` with ``model``; errors name the key and the source file."""
    try:
        return model(**dict(args))
    except ValidationError as exc:
        where = f" in {source}" if source else ""
        parts = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(arguments)"
            msg = err["msg"].removeprefix("Value error, ")
            parts.append(f"{what}.{key}: {msg}")
        raise UserError(f"bad {what} configuration{where}: " + "; ".join(parts)) from None

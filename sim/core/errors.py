"""The one error type the command line turns into a one-line message and exit code 2."""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(Exception):
    """Bad input from the user: a file, record, field or value they can fix.

    The message names the file/record/field and, where there is a fixed set,
    the valid choices. The command line prints it on one line (no traceback
    unless ``--debug``) and exits with code 2.
    """

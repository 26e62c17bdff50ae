"""Errors that end a command with one clear line and an exit code (ARCHITECTURE.md)."""

from __future__ import annotations

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_SETUP = 3
EXIT_USAGE = 64


class HarnessError(Exception):
    """The harness could not run the test (setup failed, bad environment): exit 3."""

    exit_code = EXIT_SETUP


class UsageError(HarnessError):
    """Bad usage (unknown lock, negative time limit, ...): exit 64."""

    exit_code = EXIT_USAGE


def exit_code_for(valid: object) -> int:
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN

"""Checkers: pure functions of a history. No I/O, no clock."""

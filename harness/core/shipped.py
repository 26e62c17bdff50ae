"""Where the files the harness runs but does not import are: the clients' sources
(``clients/``) and the node image's build (``docker/``). An installed wheel carries them in
``harness/shipped/`` (setup.py copies them there); a checkout has them at its top."""

from __future__ import annotations

from pathlib import Path

PACKAGED = Path(__file__).resolve().parents[1] / "shipped"
CHECKOUT = Path(__file__).resolve().parents[2]


def shipped(name: str) -> Path:
    """The folder ``name`` (``clients`` or ``docker``) of this installation."""
    packaged = PACKAGED / name
    return packaged if packaged.is_dir() else CHECKOUT / name

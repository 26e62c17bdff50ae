"""Where the files the harness runs but does not import are: the clients' sources
(``clients/``), the node image's build (``docker/``) and the suite files (``suites/``). An
installed wheel carries them in ``harness/shipped/`` (setup.py copies them there); a checkout
has them at its top."""

from __future__ import annotations

from pathlib import Path

PACKAGED = Path(__file__).resolve().parents[1] / "shipped"
CHECKOUT = Path(__file__).resolve().parents[2]


def shipped(name: str) -> Path:
    """The folder ``name`` (``clients``, ``docker``, ``suites``) of this installation."""
    packaged = PACKAGED / name
    return packaged if packaged.is_dir() else CHECKOUT / name

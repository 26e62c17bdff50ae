"""The wheel carries what the harness runs but does not import: the clients' sources
(``clients/``) and the node image's build (``docker/``), copied into ``harness/shipped/``
(:mod:`harness.core.shipped` finds them there, or in a checkout). Everything else is in
pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("clients", "docker")
SKIP = shutil.ignore_patterns("__pycache__", "node_modules", ".*", "packages.txt")


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        for name in SHIPPED:
            out = Path(self.build_lib, "harness", "shipped", name)
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(Path(__file__).resolve().parent / name, out, ignore=SKIP)


setup(cmdclass={"build_py": BuildPy})

"""What the wheel carries beyond pyproject.toml's metadata.

- The roles: the checkout keeps ``checker/``, ``dbs/``, ``nemesis/`` and ``workloads/`` at its
  top level, but an installed harness must not claim those generic names in site-packages (a
  library's own ``checker`` package would shadow ours or ours it). The wheel installs them as
  ``harness.checker``, ``harness.dbs``, ``harness.nemesis`` and ``harness.workloads``, and the
  build rewrites their references (imports, and the ``package.module`` names in strings: the
  registry's built-ins, ``python -m workloads.client``) to match, as vendoring tools do.
- What the harness runs but does not import: the clients' sources (``clients/``), the node
  image's build (``docker/``) and the suite files (``suites/``: ``harness zoo``'s default),
  copied into ``harness/shipped/`` (:mod:`harness.core.shipped` finds them there, or in a
  checkout).
"""

import re
import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROLES = ("checker", "dbs", "nemesis", "workloads")
SHIPPED = ("clients", "docker", "suites")
SKIP = shutil.ignore_patterns("__pycache__", "node_modules", ".*", "packages.txt")
# ``from checker.x import``, ``import checker.x``, ``"workloads.client"``, ``'dbs.redis:RedisDB'``
# (the role's name then a dot: a word "checker" alone, a key or a label, stays as it is)
REFERENCE = re.compile(rf"""(?m)(^\s*from\s+|^\s*import\s+|["'])({"|".join(ROLES)})"""
                       r"(?=\.|\s+import\b)")


def installed(source: str) -> str:
    """A module's source with every reference to a role package moved under ``harness.``."""
    return REFERENCE.sub(lambda m: f"{m[1]}harness.{m[2]}", source)


class BuildPy(build_py):
    def run(self) -> None:
        # a pure-Python build: build_py is the first to write build_lib, so nothing of an
        # earlier build (the checkout's old top-level role packages) can reach this wheel
        shutil.rmtree(self.build_lib, ignore_errors=True)
        super().run()
        for name in SHIPPED:
            out = Path(self.build_lib, "harness", "shipped", name)
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(HERE / name, out, ignore=SKIP)
        for path in Path(self.build_lib, "harness").rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if (moved := installed(text)) != text:
                path.write_text(moved, encoding="utf-8")


PACKAGES = find_packages(include=["harness", "harness.*"]) + [
    f"harness.{p}" for p in find_packages(include=[f"{r}{s}" for r in ROLES for s in ("", ".*")])]
setup(cmdclass={"build_py": BuildPy}, packages=PACKAGES,
      package_dir={f"harness.{r}": r for r in ROLES})

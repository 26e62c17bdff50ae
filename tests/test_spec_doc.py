"""docs/spec.md is generated from the keys the code reads (`harness list --spec`), and
`harness run --print-config` prints a spec that, given back with --config, is the same test."""

from __future__ import annotations

import re
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

from harness.cli import load_toml, main, spec_data
from harness.cli_parser import build_parser
from harness.controller.backends.ssh import hosts
from harness.controller.spec import TestSpec
from harness.core.schedule import Step
from harness.presentation import spec_doc, suite

PAGE = Path(__file__).resolve().parents[1] / "docs" / "spec.md"
SCHEDULE = '[[step]]\nat = 1.0\nfault = "pause"\ntarget = "holder"\nduration = 2.0\n'
COMMANDS = [
    [],
    ["--nemesis", "clock", "--nemesis-opt", "clock-offset=60", "--seed", "3", "--hold", "1-3"],
    ["--db", "zookeeper", "--nemesis", "partition:waiter,kill", "--clients", "3",
     "--time-limit", "12", "--links", "proxy", "--ttl", "5"],
    ["--workload", "fenced", "--lock", "redis-fenced", "--keys", "2", "--op-timeout", "3"],
]


def documented() -> dict[str, set[str]]:
    """Each section's keys as the page lists them (its tables' first column)."""
    out: dict[str, set[str]] = {}
    section = ""
    for line in PAGE.read_text().splitlines():
        if line.startswith("#"):
            section = line.lstrip("# ")
        elif m := re.match(r"^\| `([^`]+)` \|", line):
            out.setdefault(section, set()).add(m[1])
    return out


def printed(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["run", "--print-config", *args]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def test_the_committed_page_is_the_generated_one() -> None:
    assert PAGE.read_text() == spec_doc.markdown(), "regenerate: harness list --spec > docs/spec.md"


def test_the_page_has_every_key_read_and_no_other() -> None:
    page = documented()
    spec = page["Test spec: `harness run --config FILE.toml`"]
    assert spec == {f.name.replace("_", "-") for f in fields(TestSpec)}
    assert page["`[[step]]`: a fault schedule in a spec"] == {f.name for f in fields(Step)}
    assert page["`[[run]]` (and `[defaults]`)"] == {
        *suite.RUN_KEYS, *suite.OPTION_TABLES, "seeds", "expect"}
    assert page["Hosts file: `harness run --backend ssh --hosts FILE.toml`"] == set(
        hosts.TOP_KEYS)
    assert page["`[[hosts]]`, `[resource]` (and `[defaults]`)"] == set(hosts.HOST_KEYS)
    assert page["`jump` as a table"] == set(hosts.JUMP_KEYS)
    assert page["`[clients]`"] == set(hosts.CLIENT_KEYS)


def test_a_key_without_a_meaning_or_a_meaning_without_a_key_stops_the_page(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hosts, "CLIENT_KEYS", (*hosts.CLIENT_KEYS, "gateway"))
    with pytest.raises(RuntimeError, match=r"\[clients\]: keys read but undocumented "
                                           r"\['gateway'\]"):
        spec_doc.markdown()
    monkeypatch.setattr(hosts, "CLIENT_KEYS", ("addresses",))
    with pytest.raises(RuntimeError, match=r"documented but not read \['interface'\]"):
        spec_doc.markdown()


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "defaults")
def test_print_config_round_trips_and_every_key_is_documented(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    store = tmp_path / "store"
    replay = tmp_path / "steps.toml"
    replay.write_text(SCHEDULE)
    args = [*args, "--store", str(store), *(["--replay", str(replay)] if not args else [])]
    first = printed(capsys, *args)
    assert not store.exists()  # nothing started, not even the store
    config = tmp_path / "spec.toml"
    config.write_text(first)
    data = tomllib.loads(first)
    page = documented()
    assert set(data) - {"step"} <= page["Test spec: `harness run --config FILE.toml`"]
    for step in data.get("step", []):
        assert set(step) <= page["`[[step]]`: a fault schedule in a spec"]
    assert bool(data.get("step")) == (args[-2] == "--replay")
    assert printed(capsys, "--config", str(config)) == first
    given = TestSpec.from_dict({**spec_data(build_parser().parse_args(["run", *args])),
                                "seed": data["seed"]})  # drawn once, then printed
    assert TestSpec.from_dict(load_toml(config)).validate().to_dict() == given.validate(
        ).to_dict()

"""The report runs one registry in the order its `requires` and `uses` declare, passes each
analysis the results it needs, and omits one whose requirement did not run, naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyses.registry import RegistryError, dependency_order
from analyses.report import ReportSizes, build_report, load_report_json
from analyses.report.result import Built, NoSizes

RUN = Path(__file__).resolve().parents[1] / "checkpoints" / "small-add"


class Planted:
    """An analysis that records when it ran and what it was handed."""

    Config = NoSizes

    def __init__(self, key, requires=(), uses=(), skip=None, fail=False, log=None):
        self.key, self.title = key, f"Planted {key}"
        self.requires, self.uses, self.skip, self.fail, self.log = tuple(requires), tuple(uses), skip, fail, log

    def skip_reason(self, run):
        return self.skip

    def run(self, run, config, needs):
        self.log.append((self.key, sorted(needs)))
        if self.fail:
            raise RuntimeError(f"{self.key} broke")
        return Built(data={"got": {k: r.to_dict() for k, r in needs.items()}}, sentences=[f"{self.key} ran."])


def test_dependency_order_keeps_the_registry_order_where_it_can():
    a, b, c = Planted("a", requires=["c"]), Planted("b"), Planted("c", uses=["b"])
    assert [x.key for x in dependency_order([a, b, c])] == ["b", "c", "a"]
    with pytest.raises(RegistryError, match="'a' needs 'nowhere', which is not registered"):
        dependency_order([Planted("a", requires=["nowhere"])])
    with pytest.raises(RegistryError, match=r"cycle: a \(needs b\), b \(needs a\)"):
        dependency_order([Planted("a", requires=["b"]), Planted("b", uses=["a"])])


@pytest.mark.skipif(not (RUN / "config.json").exists(), reason="checkpoints/small-add is not here")
def test_the_report_runs_requirements_first_and_skips_what_they_blocked(tmp_path, monkeypatch):
    log: list = []
    planted = [
        Planted("late", requires=["early"], log=log),  # listed before what it requires
        Planted("early", log=log),
        Planted("broken", fail=True, log=log),
        Planted("after_broken", requires=["broken"], log=log),
        Planted("not_here", skip="no such thing in this run", log=log),
        Planted("after_not_here", requires=["not_here"], log=log),
        Planted("optional", uses=["broken", "early"], log=log),  # runs with what did run
    ]
    monkeypatch.setattr("analyses.report.SECTIONS", tuple(planted))
    build_report(RUN, tmp_path / "out", sizes=ReportSizes.quick(), progress=False, device="cpu")
    report = load_report_json(tmp_path / "out")
    assert log == [("early", []), ("late", ["early"]), ("broken", []), ("optional", ["early"])]
    sections = report["sections"]
    assert list(sections) == [p.key for p in planted]  # the page keeps the registry's order
    assert sections["late"]["status"] == "ok" and sections["late"]["data"] == {"got": {"early": {"got": {}}}}
    assert sections["broken"]["status"] == "failed"
    after = sections["after_broken"]
    assert after["status"] == "omitted"
    assert after["reason"] == ("it requires the broken section (Planted broken), which was failed: "
                               "RuntimeError: broken broke")
    assert sections["after_not_here"]["reason"] == ("it requires the not_here section (Planted not_here), "
                                                    "which was omitted: no such thing in this run")
    assert sections["optional"]["status"] == "ok"

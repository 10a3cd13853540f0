"""Every analysis is one package laid out the same way (ARCHITECTURE.md, "Adding an analysis"):
`__init__.py` (docstring and re-exports only), `config.py`, `analysis.py` (a module-level
`run`), `result.py` (frozen dataclasses), `figures.py`, `findings.py` and `plugin.py` (the
registered `ANALYSIS`). Checked for every analysis in `analyses.registry.ANALYSES`.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
from pathlib import Path

import pytest

from analyses.registry import ANALYSES

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ("__init__.py", "config.py", "analysis.py", "result.py", "figures.py", "findings.py", "plugin.py")


def _package_of(analysis) -> str:
    """`analyses.<name>`: the package whose code defines the registered object."""
    return ".".join(type(analysis).__module__.split(".")[:2])


PACKAGES = sorted({_package_of(a) for a in ANALYSES})


def _folder(package: str) -> Path:
    return ROOT.joinpath(*package.split("."))


def _tree(package: str, file: str) -> ast.Module:
    return ast.parse((_folder(package) / file).read_text())


def test_every_registered_analysis_is_listed():
    assert len(PACKAGES) >= len(ANALYSES) and all(p.startswith("analyses.") for p in PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_an_analysis_is_a_package_with_the_template_files(package):
    folder = _folder(package)
    assert folder.is_dir(), f"{package} is a single module; make it a package {folder.relative_to(ROOT)}/"
    missing = [f for f in TEMPLATE if not (folder / f).is_file()]
    assert missing == [], f"{package} lacks {', '.join(missing)}"


@pytest.mark.parametrize("package", PACKAGES)
def test_analysis_py_defines_run_and_the_package_re_exports_it(package):
    tree = _tree(package, "analysis.py")
    assert any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body), \
        f"{package}.analysis defines no module-level run"
    assert importlib.import_module(package).run is importlib.import_module(f"{package}.analysis").run


@pytest.mark.parametrize("package", PACKAGES)
def test_init_only_re_exports(package):
    """A docstring, imports and `__all__`: no function, class or other statement."""
    body = _tree(package, "__init__.py").body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring

    def allowed(node: ast.stmt) -> bool:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        return bool(targets) and all(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)

    extra = [f"line {n.lineno}: {type(n).__name__}" + (f" {n.name}" if hasattr(n, "name") else "")
             for n in body if not allowed(n)]
    assert extra == [], f"{package}/__init__.py holds more than re-exports: {extra}"


@pytest.mark.parametrize("package", PACKAGES)
def test_result_py_holds_frozen_dataclasses(package):
    module = importlib.import_module(f"{package}.result")
    classes = [c for _, c in inspect.getmembers(module, inspect.isclass)
               if c.__module__ == module.__name__ and dataclasses.is_dataclass(c)]
    assert classes, f"{package}.result defines no result dataclass"
    assert [c.__name__ for c in classes if not c.__dataclass_params__.frozen] == []


@pytest.mark.parametrize("analysis", ANALYSES, ids=lambda a: a.key)
def test_the_registered_object_lives_in_its_plugin(analysis):
    assert type(analysis).__module__ == f"{_package_of(analysis)}.plugin"

"""Dependencies point one way (ARCHITECTURE.md, "Layers"): library -> analyses -> report.

Checked on the source, not by importing, so the test stays fast and names the offending
line. The CLI may reach the report, but only inside a command function (a lazy import), so
`import abacus_interp` never pulls in the analyses.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path, *, module_level_only: bool) -> list[tuple[int, str]]:
    """(line, module) for every import in `path`; with `module_level_only`, imports inside
    a function body are left out, because they run only when that function is called."""
    tree = ast.parse(path.read_text(), filename=str(path))
    lazy: set[int] = set()
    if module_level_only:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lazy.update(id(inner) for inner in ast.walk(node) if inner is not node)
    found = []
    for node in ast.walk(tree):
        if id(node) in lazy:
            continue
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def offending(paths, prefix: str, *, module_level_only: bool) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in paths
        for line, module in imported_modules(path, module_level_only=module_level_only)
        if module == prefix or module.startswith(prefix + ".")
    ]


def test_the_library_never_imports_the_analyses_at_module_level():
    library = sorted((ROOT / "abacus_interp").rglob("*.py"))
    assert offending(library, "analyses", module_level_only=True) == []


def test_only_the_cli_reaches_the_analyses_even_lazily():
    library = [p for p in sorted((ROOT / "abacus_interp").rglob("*.py")) if p.name != "cli.py"]
    assert offending(library, "analyses", module_level_only=False) == []


def test_no_analysis_imports_the_report():
    report = ROOT / "analyses" / "report"
    analyses = [p for p in sorted((ROOT / "analyses").rglob("*.py")) if report not in p.parents]
    assert offending(analyses, "analyses.report", module_level_only=False) == []

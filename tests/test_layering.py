"""Dependencies point one way (ARCHITECTURE.md, "Layers"): library (`abacus_interp`) ->
analyses -> report -> experiments -> CLI (`abacus_lab`), and inside the library the model core
(`abacus_interp/core/`) stands on nothing else of it and draws no figures.

Checked on the source, not by importing, so the test stays fast and names the offending
line. Lazy imports (inside a function) count: a layer never reaches up, not even when a
function runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("abacus_interp", "analyses", "abacus_lab")  # bottom to top


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


def test_the_library_never_imports_the_analyses_or_the_lab_even_lazily():
    library = sorted((ROOT / "abacus_interp").rglob("*.py"))
    assert offending(library, "analyses", module_level_only=False) == []
    assert offending(library, "abacus_lab", module_level_only=False) == []


def test_the_analyses_never_import_the_lab_even_lazily():
    analyses = sorted((ROOT / "analyses").rglob("*.py"))
    assert offending(analyses, "abacus_lab", module_level_only=False) == []


def test_the_experiments_never_import_the_cli():
    experiments = sorted((ROOT / "abacus_lab" / "experiments").rglob("*.py"))
    assert offending(experiments, "abacus_lab.cli", module_level_only=False) == []


def test_no_analysis_imports_the_report():
    report = ROOT / "analyses" / "report"
    analyses = [p for p in sorted((ROOT / "analyses").rglob("*.py")) if report not in p.parents]
    assert offending(analyses, "analyses.report", module_level_only=False) == []


CORE = ROOT / "abacus_interp" / "core"


def absolute_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in `path`, lazy ones too, relative ones resolved
    against the file's package (`from ..errors import X` in abacus_interp/core/model.py is
    abacus_interp.errors)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts[:-1]  # a module's package; an __init__'s package is its own folder
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.append((node.lineno, node.module))
                continue
            base = package[:len(package) - (node.level - 1)]
            if node.module:
                found.append((node.lineno, ".".join([*base, node.module])))
            else:  # `from . import x`: x may be a module
                found.extend((node.lineno, ".".join([*base, alias.name])) for alias in node.names)
    return found


def test_the_model_core_draws_no_figures():
    core = sorted(CORE.rglob("*.py"))
    assert core and offending(core, "plotly", module_level_only=False) == []


def test_plotly_in_the_library_is_only_the_evaluation_figures():
    """Figures are the analyses' and the report's; the one exception is EvalReport.figures(),
    whose module (abacus_interp/evaluation/figures.py) no library module imports at module
    level, so `import abacus_interp` never pulls in plotly."""
    library = sorted((ROOT / "abacus_interp").rglob("*.py"))
    allowed = "abacus_interp/evaluation/figures.py:"
    assert [line for line in offending(library, "plotly", module_level_only=False) if not line.startswith(allowed)] == []
    assert offending(library, "abacus_interp.evaluation.figures", module_level_only=True) == []


def test_the_model_core_imports_nothing_else_of_the_library():
    """No tasks, training, evaluation, experiments or checkpoints under the core: only the
    core itself and the library's errors."""
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {module}"
             for path in sorted(CORE.rglob("*.py"))
             for line, module in absolute_imports(path)
             if module.startswith("abacus_interp") and not module.startswith("abacus_interp.core")
             and module != "abacus_interp.errors"]
    assert wrong == []


def test_every_library_folder_is_a_package():
    """setuptools' find_packages ships only folders with an __init__.py."""
    folders = {p.parent for top in PACKAGES for p in (ROOT / top).rglob("*.py")} | {ROOT / top for top in PACKAGES}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists()) == []


def _import_graph() -> dict[Path, set[Path]]:
    """file -> the files of the project's packages it imports, lazy imports included
    (`from pkg import name` imports pkg/__init__.py, and pkg/name.py where that is a module)."""
    files = [p for folder in PACKAGES for p in (ROOT / folder).rglob("*.py")]
    module_file = {}
    for p in files:
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        module_file[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph: dict[Path, set[Path]] = {p: set() for p in files}
    for p in files:
        package = list(p.relative_to(ROOT).parts[:-1])
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
                module = ".".join(part for part in (base, node.module or "") if part)
                names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            graph[p].update(module_file[n] for n in names if n in module_file and module_file[n] != p)
    return graph


def test_no_import_circles_even_lazily():
    """Every file stands above what it imports: no two files of the project's packages
    import each other, directly or round a loop, not even inside a function."""
    graph = _import_graph()
    state: dict[Path, str] = {}
    circles: list[str] = []

    def visit(node: Path, path: list[Path]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                loop = path[path.index(nxt):] + [nxt]
                circles.append(" -> ".join(str(p.relative_to(ROOT)) for p in loop))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_function_over_sixty_lines():
    """Orchestrators read as phases (ARCHITECTURE.md): a function past 60 lines, docstring
    included, is split into its phases instead."""
    long = []
    for folder in PACKAGES:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long, "functions over 60 lines:\n" + "\n".join(long)

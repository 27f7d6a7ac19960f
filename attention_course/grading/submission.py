"""Read a submitted notebook against the released one: what to run, and what was tampered with.

Trusted and pure: it parses JSON and Python source, and never runs either. Test cells are restored
from the released notebook (so their hidden parts never enter a graded notebook); a test cell that
was edited, deleted, duplicated or stripped of its grade id is restored and flagged, and so is an
edited read-only cell. Cells whose nbgrader metadata differs from the release (an answer cell
marked as graded, points changed, a test cell added) are flagged here and graded from the
release's metadata (``nbgrader_bridge.RestoreReleaseMetadata``). The code to run in the sandbox is
every code cell except the test cells: verdicts come from the grader's own calls, not from the
notebook's assertions. What is forbidden is decided by what a graded call computes, in the sandbox
(``runner``), never by what the notebook mentions: a scratch cell that compares with
``torch.softmax`` costs nothing.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

MAX_NOTEBOOK_BYTES = 50 << 20
NBGRADER_FIELDS = ("grade", "solution", "locked", "task", "points")


@dataclass
class Prepared:
    cells: list[str]  # the code cells to run in the sandbox, in order
    flags: list[str] = field(default_factory=list)  # what the instructor should know, one line each
    helpers: str = ""  # the release's given definitions, re-installed before each graded call
    readable: bool = True


def _grade_id(cell) -> str | None:
    return (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")


def _is_test(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader") or {}
    return bool(meta.get("grade")) and not meta.get("solution") and cell.get("cell_type") == "code"


def _is_locked(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader") or {}
    return bool(meta.get("locked")) and not meta.get("solution")


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


HIDDEN_TESTS = re.compile(r"^[ \t]*#+[ \t]*BEGIN HIDDEN TESTS.*?^[ \t]*#+[ \t]*END HIDDEN TESTS[^\n]*\n?", re.M | re.S)


def _visible(source: str) -> str:
    """A test cell's source as students receive it: without its hidden-tests block, ends trimmed."""
    return HIDDEN_TESTS.sub("", source).strip()


def read_notebook(path: Path):
    """The notebook at ``path``, or a reason it cannot be graded."""
    if not path.is_file():
        return None, "missing notebook"
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        return None, f"notebook larger than {MAX_NOTEBOOK_BYTES >> 20} MB"
    if path.stat().st_size == 0:
        return None, "empty notebook file"
    try:
        return nbformat.reads(path.read_text(encoding="utf-8"), as_version=4), ""
    except (ValueError, UnicodeDecodeError, json.JSONDecodeError, nbformat.reader.NotJSONError) as error:
        return None, f"unreadable notebook: {str(error).splitlines()[0][:200] if str(error) else type(error).__name__}"


def prepare(submitted: Path, released) -> Prepared:
    notebook, problem = read_notebook(submitted)
    if notebook is None:
        return Prepared(cells=[], flags=[problem], readable=False)

    flags = metadata_changes(notebook, released)
    released_tests = {_grade_id(c): _source(c) for c in released.cells if _is_test(c)}
    released_locked = {_grade_id(c): _source(c) for c in released.cells
                       if _is_locked(c) and not _is_test(c) and c.cell_type == "code" and _grade_id(c)}
    test_by_source = {_visible(source): grade_id for grade_id, source in released_tests.items()}
    cells, student_cells, seen_tests = [], [], set()

    for cell in notebook.cells:
        if cell.get("cell_type") != "code":
            continue
        grade_id, source = _grade_id(cell), _source(cell)
        if grade_id in released_tests or (grade_id is None and _visible(source) in test_by_source):
            grade_id = grade_id or test_by_source[_visible(source)]
            if _grade_id(cell) is None:
                flags.append(f"test cell {grade_id}: grade id stripped (restored)")
            elif grade_id in seen_tests:
                flags.append(f"test cell {grade_id}: duplicated (the copy is ignored)")
            elif _visible(source) != _visible(released_tests[grade_id]):
                flags.append(f"test cell {grade_id}: edited (restored)")
            seen_tests.add(grade_id)
            continue  # test cells are not run: the grader's own calls decide
        if grade_id in released_locked and source.strip() != released_locked[grade_id].strip():
            flags.append(f"read-only cell {grade_id}: edited (restored)")
            source = released_locked[grade_id]
        cells.append(source)
        if grade_id not in released_locked:
            student_cells.append(source)
    for grade_id in released_tests:
        if grade_id not in seen_tests:
            flags.append(f"test cell {grade_id}: deleted (restored)")
    present = {_grade_id(c) for c in notebook.cells}
    missing_locked = [grade_id for grade_id in released_locked if grade_id not in present]
    for grade_id in missing_locked:
        flags.append(f"read-only cell {grade_id}: deleted (restored)")
    # Read-only code cells (the setup) come first in every assignment: put deleted ones back there.
    cells[:0] = [released_locked[grade_id] for grade_id in missing_locked]

    prepared = Prepared(cells=cells, flags=flags, helpers=given_helpers(released))
    locked_names = _defined_names([source for source in released_locked.values()])
    flags.extend(suspicious_code(student_cells, locked_names))
    return prepared


def metadata_changes(notebook, released) -> list[str]:
    """One line per cell whose nbgrader metadata is not the release's (graded from the release's)."""
    release = {_grade_id(c): (c.get("metadata", {}).get("nbgrader") or {}) for c in released.cells if _grade_id(c)}
    flags = []
    for cell in notebook.cells:
        meta = cell.get("metadata", {}).get("nbgrader") or {}
        grade_id = meta.get("grade_id")
        if not meta or grade_id is None:
            continue
        if grade_id not in release:
            if meta.get("grade") or meta.get("solution") or meta.get("points"):
                what = f"{meta.get('points', 0)} points" if meta.get("grade") else "an answer cell"
                flags.append(f"cell {grade_id}: nbgrader metadata not in the release ({what}): ignored")
            continue
        original = release[grade_id]
        changed = [f"{key} {original.get(key)!r} -> {meta.get(key)!r}" for key in NBGRADER_FIELDS
                   if key in original or key in meta if _normal(original.get(key)) != _normal(meta.get(key))]
        if changed:
            flags.append(f"cell {grade_id}: nbgrader metadata changed ({', '.join(changed)}): restored from the release")
    return flags


def _normal(value):
    return value if value not in (None, False, 0, 0.0) else None


def given_helpers(released) -> str:
    """The definitions the notebook gives (imports, functions, classes, constants), from its read-only code
    cells: re-run before each graded call, so that an answer cell that redefines one changes nothing."""
    parts = []
    for cell in released.cells:
        if cell.get("cell_type") != "code" or not _is_locked(cell) or _is_test(cell):
            continue
        try:
            tree = ast.parse(_source(cell))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                parts.append(ast.unparse(node))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and not any(
                    isinstance(child, (ast.Call, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp, ast.With))
                    for child in ast.walk(node)):
                parts.append(ast.unparse(node))
    return "\n\n".join(parts)


def _defined_names(sources: list[str]) -> set[str]:
    names = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        names |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return names


# ---------------------------------------------------------------------------------------------
# Code that tries to game the grader. None of it can change a verdict (test cells are not run, and
# the verdicts are decided outside the sandbox), but the instructor should hear about it.

IPYTHON_HOOKS = {"input_transformers_cleanup", "input_transformers_post", "ast_transformers", "register_magic_function",
                 "set_custom_exc", "excepthook", "displayhook", "events", "set_hook"}
TEST_HELPERS = {"assert_close", "assert_allclose", "assert_equal", "assert_array_equal", "assert_almost_equal",
                "run_hidden_check", "expect_close", "no_shortcuts", "allclose", "equal"}
IMPERSONATION = {"__eq__", "__ne__", "__torch_function__", "__torch_dispatch__", "__instancecheck__", "__class__"}
NETWORK_MODULES = {"socket", "urllib", "http", "requests", "ftplib", "smtplib", "telnetlib", "xmlrpc", "asyncio"}
PROCESS_CALLS = {"fork", "forkpty", "system", "popen", "spawnl", "spawnv", "execv", "execve", "Popen", "Process", "Pool"}
PROCESS_MODULES = {"subprocess", "multiprocessing", "pty"}
CRASH_CALLS = {"_exit", "abort", "kill", "setrecursionlimit"}
CRASH_MODULES = {"ctypes", "faulthandler", "signal"}
OUTSIDE_WORDS = ("gradebook", "solutions", "submitted", "autograded", "feedback", "grader-results", "nbgrader_config")
OUTSIDE_PREFIXES = ("/", "../", "~/")


def _attribute_chain(node: ast.AST) -> list[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return parts[::-1]


def suspicious_code(cells: list[str], locked_names: set[str]) -> list[str]:
    """One line per kind of grader-gaming found in the student's code, in a fixed order."""
    found: dict[str, set[str]] = {}

    def note(kind: str, detail: str) -> None:
        found.setdefault(kind, set()).add(detail)

    for source in cells:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                if node.attr in IPYTHON_HOOKS:
                    note("installs IPython hooks or input transformers", node.attr)
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    chain = _attribute_chain(target)
                    # A module's or class's function patched (torch.testing.assert_close = ...), or a helper the
                    # notebook gives redefined; a variable that happens to be called `equal` is neither.
                    if (len(chain) > 1 and (chain[-1] in TEST_HELPERS or "testing" in chain)) or (
                            len(chain) == 1 and chain[0] in locked_names | {"run_hidden_check"}):
                        note("replaces test helpers", ".".join(chain))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and node.args:
                chain = _attribute_chain(node.args[0])
                if "testing" in chain or (len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                                          and node.args[1].value in TEST_HELPERS):
                    note("replaces test helpers", ".".join(chain) or "setattr")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name in locked_names | {"run_hidden_check"}:
                    note("replaces test helpers", node.name)
                if node.name in IMPERSONATION:
                    note("defines objects that can pass for tensors or compare equal to anything", node.name)
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    if _attribute_chain(base)[-1:] == ["Tensor"]:
                        note("defines objects that can pass for tensors or compare equal to anything", f"class {node.name}(Tensor)")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                for module in modules:
                    top = module.split(".")[0]
                    if top in NETWORK_MODULES:
                        note("tries to use the network", top)
                    if top in PROCESS_MODULES:
                        note("starts processes", top)
                    if top in CRASH_MODULES:
                        note("can crash or stop the runner on purpose", top)
                    if top == "sqlite3":
                        note("opens databases", top)
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in PROCESS_CALLS:
                    note("starts processes", name)
                if name in CRASH_CALLS:
                    note("can crash or stop the runner on purpose", name)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                text = node.value
                if any(c.isspace() for c in text.strip()):
                    continue  # prose (a message, a comment in a string) names things; a path or a name does not
                if "NBGRADER" in text.upper():
                    note("looks for the grader", text[:40])
                if any(word in text for word in OUTSIDE_WORDS) or (text.startswith(OUTSIDE_PREFIXES) and len(text) > 2):
                    note("reaches for files outside its folder", text[:60])
    return [f"{kind}: {', '.join(sorted(details))[:120]}" for kind, details in sorted(found.items())]

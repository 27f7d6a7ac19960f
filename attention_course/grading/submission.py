"""Read a submitted notebook against the released one: what to run, and what was tampered with.

Trusted and pure: it parses JSON and Python source, and never runs either. Test cells are restored
from the released notebook (so their hidden parts never enter a graded notebook); a test cell that
was edited, deleted, duplicated or stripped of its grade id is restored and flagged, and so is an
edited read-only cell. The code to run in the sandbox is every code cell except the test cells:
verdicts come from the grader's own calls, not from the notebook's assertions.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from attention_course.grading.cases import FORBIDDEN_CALLS

MAX_NOTEBOOK_BYTES = 50 << 20

# Names whose use in student code means an attempt to switch off the grader's call recording.
EVASION_NAMES = (
    "DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchDispatch", "_pop_mode",
    "_push_mode", "_set_torch_function_mode", "_python_dispatch", "TorchFunctionMode", "TorchDispatchMode",
    "_disabled_torch_function_impl", "_disabled_torch_dispatch_impl",
)


@dataclass
class Prepared:
    cells: list[str]  # the code cells to run in the sandbox, in order
    flags: list[str] = field(default_factory=list)  # what the instructor should know, one line each
    forbidden_by_name: dict[str, set[str]] = field(default_factory=dict)  # top-level name -> forbidden uses in it
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

    released_tests = {_grade_id(c): _source(c) for c in released.cells if _is_test(c)}
    released_locked = {_grade_id(c): _source(c) for c in released.cells
                       if _is_locked(c) and not _is_test(c) and c.cell_type == "code" and _grade_id(c)}
    test_by_source = {_visible(source): grade_id for grade_id, source in released_tests.items()}
    flags, cells, student_cells, seen_tests = [], [], [], set()

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

    prepared = Prepared(cells=cells, flags=flags)
    prepared.forbidden_by_name, evasions = scan_forbidden(cells)
    flags.extend(f"uses {name}, which can switch off the grader's call recording" for name in sorted(evasions))
    locked_names = _defined_names([source for source in released_locked.values()])
    flags.extend(suspicious_code(student_cells, locked_names))
    return prepared


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
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                if node.attr in IPYTHON_HOOKS:
                    note("installs IPython hooks or input transformers", node.attr)
                if node.attr in {"environ", "getenv", "putenv"}:
                    note("reads or changes environment variables", node.attr)
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    chain = _attribute_chain(target)
                    if chain and (chain[-1] in TEST_HELPERS | locked_names or "testing" in chain):
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
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if "NBGRADER" in text.upper() or "GRADER" in text.upper():
                    note("looks for the grader", text[:40])
                if any(word in text for word in OUTSIDE_WORDS) or (
                        text.startswith(OUTSIDE_PREFIXES) and len(text) > 2 and " " not in text and "\n" not in text):
                    note("reaches for files outside its folder", text[:60])
    return [f"{kind}: {', '.join(sorted(details))[:120]}" for kind, details in sorted(found.items())]


# ---------------------------------------------------------------------------------------------
# Forbidden shortcuts, found in the source (trusted) as well as at run time (in the sandbox).


SHORTCUTS = set(FORBIDDEN_CALLS) | {"aten"}  # torch.ops.aten.<op> bypasses every Python-level override
FORBIDDEN_MODULES = {"attention_course"}  # the course package: its reference implementations


def _uses(node: ast.AST, own_definitions: set[str]) -> tuple[set[str], set[str]]:
    """(forbidden shortcuts used under ``node``, bare names it refers to).

    ``torch.softmax``, ``x.softmax``, ``from torch.nn.functional import softmax``, ``getattr(F, "softmax")``
    and ``torch.ops.aten`` count; a bare ``softmax(...)`` counts only when it is not the student's own function.
    """
    forbidden, names = set(), set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            names.add(child.id)
            if child.id in SHORTCUTS and child.id not in own_definitions:
                forbidden.add(child.id)
        elif isinstance(child, ast.Attribute) and child.attr in SHORTCUTS:
            forbidden.add(child.attr)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            modules = [child.module or ""] if isinstance(child, ast.ImportFrom) else [a.name for a in child.names]
            imported = [a.name for a in child.names] if isinstance(child, ast.ImportFrom) else []
            forbidden |= {part for m in modules for part in m.split(".") if part in FORBIDDEN_MODULES | {"aten"}}
            forbidden |= set(imported) & (SHORTCUTS | FORBIDDEN_MODULES)
        elif isinstance(child, ast.Constant) and isinstance(child.value, str) and " " not in child.value.strip():
            # A name in a string, as in getattr(F, "softmax") or "torch.softmax"; prose (docstrings) is not.
            forbidden |= set(child.value.strip().split(".")) & (SHORTCUTS | FORBIDDEN_MODULES)
    return forbidden, names


def scan_forbidden(cells: list[str]) -> tuple[dict[str, set[str]], set[str]]:
    """For each top-level function or class, the forbidden shortcuts it can reach; and evasion attempts.

    A function "reaches" what it uses directly and what the other top-level definitions it names use,
    so a softmax hidden in a helper still counts against the graded function that calls the helper.
    Module-level code (imports, aliases) counts against every definition.
    """
    trees = []
    for source in cells:
        try:
            trees.append(ast.parse(source))
        except SyntaxError:
            continue  # IPython magics or broken code: the run will tell
    definitions = {node.name for tree in trees for node in tree.body
                   if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    direct: dict[str, set[str]] = {}
    references: dict[str, set[str]] = {}
    module_level: set[str] = set()
    evasions: set[str] = set()
    for tree in trees:
        for node in tree.body:
            forbidden, names = _uses(node, definitions)
            evasions |= {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "")
                         for n in ast.walk(node) if isinstance(n, (ast.Attribute, ast.Name))} & set(EVASION_NAMES)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                direct[node.name] = direct.get(node.name, set()) | forbidden
                references[node.name] = references.get(node.name, set()) | names
            else:
                module_level |= forbidden
    reach: dict[str, set[str]] = {}
    for name in direct:
        seen, stack, uses = {name}, [name], set(module_level)
        while stack:
            current = stack.pop()
            uses |= direct.get(current, set())
            for other in references.get(current, set()) & direct.keys():
                if other not in seen:
                    seen.add(other)
                    stack.append(other)
        reach[name] = uses
    return reach, evasions

"""Classes for the similarity measurements: independent honest work, and copies disguised by program.

- :data:`RETYPED`: soft-hard and three-stages solutions re-typed by hand in styles the honest corpus does not
  have (loops over the last axis, ``logsumexp`` identities, ``gather``/``index_select``, a class with
  ``__call__``), written without looking at the corpus: independent of it by construction.
- :func:`independent_submissions`: the honest corpus (``tests/honest_corpus.py``) and :data:`RETYPED`, with
  every answer text used once. The corpus gives some submissions the same text for a function (the new
  work of soft-hard, the solution's style of three-stages): that is one author's text copied, not two
  students writing alike, so later uses of a text are left unanswered (the release's stub).
- :data:`DISGUISES`: what a student does to a copy so it does not look like one. Each works on the syntax
  tree or the text, written here independently of ``similarity.py``'s normalisation.
- :func:`write_class`: submissions as a course folder on disk (the release's notebooks filled in, no
  grading needed).
"""

from __future__ import annotations

import ast
import copy
import json
import random
import shutil
from pathlib import Path

from attention_course.grading.layout import REPOSITORY, Layout
from honest_corpus import CORPUS

EXERCISES = REPOSITORY / "exercises"

RETYPED: dict[str, dict[str, dict[str, str]]] = {
    "soft-hard": {
        "retyped-loop-over-rows": {
            "softmax": '''def softmax(scores, dim=-1):
    moved = scores.transpose(dim, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    rows = []
    for row in flat:
        top = row.max()
        e = (row - top).exp()
        rows.append(e / e.sum())
    return torch.stack(rows).reshape(moved.shape).transpose(dim, -1)
''',
            "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    w = softmax(scores / temperature, dim=-1)
    out = torch.zeros(*values.shape[:-2], values.shape[-1], dtype=values.dtype)
    for k in range(values.shape[-2]):
        out = out + w[..., k:k + 1] * values[..., k, :]
    return out, w
''',
            "hard_attention": '''def hard_attention(scores, values):
    best = scores.argmax(dim=-1)
    w = torch.zeros_like(scores)
    w.scatter_(-1, best.unsqueeze(-1), 1)
    picked = torch.gather(values, -2, best[..., None, None].expand(*best.shape, 1, values.shape[-1]))
    return picked.squeeze(-2), w
''',
            "sample_hard_attention": '''def sample_hard_attention(scores, values, uniform):
    g = -torch.log(-torch.log(uniform))
    return hard_attention(g + scores, values)
''',
            "straight_through_attention": '''def straight_through_attention(scores, values, temperature=1.0):
    y_soft = softmax(scores / temperature)
    y_hard = torch.zeros_like(y_soft).scatter(-1, y_soft.argmax(-1, keepdim=True), 1.0)
    w = (y_hard - y_soft).detach() + y_soft
    return torch.einsum("...k,...kd->...d", w, values), w
''',
        },
        "retyped-logsumexp-identity": {
            "softmax": '''def softmax(scores, dim=-1):
    log_z = scores.logsumexp(dim=dim, keepdim=True)
    return (scores - log_z).exp()
''',
            "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """Weights at the given temperature, then their average of the values."""
    probabilities = softmax(scores.div(temperature))
    return (probabilities[..., :, None] * values).sum(dim=-2), probabilities
''',
            "hard_attention": '''def hard_attention(scores, values):
    winners = scores.argmax(-1)
    one_hot = (torch.arange(scores.shape[-1]) == winners[..., None]).to(scores.dtype)
    return (one_hot[..., None] * values).sum(-2), one_hot
''',
            "sample_hard_attention": '''def sample_hard_attention(scores, values, uniform):
    gumbel = uniform.log().neg().log().neg()
    perturbed = scores + gumbel
    return hard_attention(perturbed, values)
''',
            "straight_through_attention": '''def straight_through_attention(scores, values, temperature=1.0):
    _, hard = hard_attention(scores, values)
    soft = softmax(scores / temperature)
    mixed = soft + (hard - soft).detach()
    return (mixed[..., None] * values).sum(-2), mixed
''',
        },
        "retyped-callable-class": {
            "softmax": '''class _Softmax:
    def __call__(self, x, dim=-1):
        shifted = x - torch.amax(x, dim=dim, keepdim=True)
        ex = torch.exp(shifted)
        return ex / torch.sum(ex, dim=dim, keepdim=True)


softmax = _Softmax()
''',
            "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    a = softmax(scores / temperature)
    return torch.matmul(a[..., None, :], values)[..., 0, :], a
''',
            "hard_attention": '''def hard_attention(scores, values):
    k = scores.shape[-1]
    first = torch.argmax(scores, dim=-1)
    onehot = F.one_hot(first, k).to(dtype=scores.dtype)
    return torch.matmul(onehot[..., None, :], values)[..., 0, :], onehot
''',
            "sample_hard_attention": '''def sample_hard_attention(scores, values, uniform):
    noise = -(-(uniform.log())).log()
    return hard_attention(scores + noise, values)
''',
            "straight_through_attention": '''def straight_through_attention(scores, values, temperature=1.0):
    soft_out, soft_w = soft_attention(scores, values, temperature)
    hard_out, hard_w = hard_attention(scores, values)
    w = hard_w + soft_w - soft_w.detach()
    return torch.matmul(w[..., None, :], values)[..., 0, :], w
''',
        },
    },
    "three-stages": {
        "retyped-explicit-loops": {
            "dot_score": '''def dot_score(queries, keys):
    return torch.einsum("bqd,bkd->bqk", queries, keys)
''',
            "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    d = queries.size(-1)
    return torch.einsum("bqd,bkd->bqk", queries, keys) / d ** 0.5
''',
            "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    qn = queries.norm(dim=-1, keepdim=True).clamp(min=eps)
    kn = keys.norm(dim=-1, keepdim=True).clamp(min=eps)
    return (queries / qn) @ (keys / kn).transpose(-1, -2)
''',
            "masked_softmax": '''def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        shifted = scores - scores.amax(-1, keepdim=True)
        e = shifted.exp()
        return e / e.sum(-1, keepdim=True)
    B, Q, K = scores.shape
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, Q)
    keep = torch.arange(K)[None, None, :] < lens[..., None]
    filled = scores.masked_fill(~keep, float("-inf"))
    top = filled.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = (filled - top).exp() * keep
    total = e.sum(-1, keepdim=True)
    return torch.where(total > 0, e / total.clamp(min=1e-30), torch.zeros_like(e))
''',
            "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    a = masked_softmax(score_fn(queries, keys), valid_lens)
    return torch.bmm(a, values), a
''',
        },
    },
}


def independent_submissions(assignment: str) -> dict[str, dict[str, str]]:
    """{name: {grade id: answer}} from the honest corpus and :data:`RETYPED`, every answer text used once."""
    seen, found = set(), {}
    everything = {name: honest.answers for name, honest in CORPUS.get(assignment, {}).items()}
    everything.update(RETYPED.get(assignment, {}))
    for name, answers in everything.items():
        kept = {}
        for grade_id, source in answers.items():
            if source.strip() not in seen:
                seen.add(source.strip())
                kept[grade_id] = source
        found[name] = kept
    return found


# =============================================================================================
# Disguises

WORDS = ["alpha", "beta", "gamma", "delta", "kappa", "omega", "foo", "bar", "baz", "qux", "tmp", "res", "aux", "val",
         "mat", "vec", "acc", "buf", "data", "thing", "stuff", "my_x", "zz", "item"]


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node):
        node.id = self.mapping.get(node.id, node.id)
        return node

    def visit_arg(self, node):
        node.arg = self.mapping.get(node.arg, node.arg)
        return node

    def visit_FunctionDef(self, node):
        node.name = self.mapping.get(node.name, node.name)
        self.generic_visit(node)
        return node

    visit_ClassDef = visit_FunctionDef

    def visit_keyword(self, node):  # f(dim=x): the keyword is the callee's, the value is ours
        node.value = self.visit(node.value)
        return node


def rename(source: str, rng: random.Random, keep: set[str] = frozenset()) -> str:
    """Every local name, argument and helper renamed (the graded name in ``keep``, and globals, stay).
    Keyword arguments of the graded functions keep their names: calls by keyword must still work."""
    tree = ast.parse(source)
    local = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
        elif isinstance(node, ast.arg) and node.arg not in ("self", "ctx"):
            local.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name not in keep and not node.name.startswith("__"):
            local.add(node.name)
    for node in ast.walk(tree):  # parameters with defaults may be passed by keyword: keep them
        if isinstance(node, ast.FunctionDef) and node.name in keep:
            local -= {a.arg for a in node.args.args[len(node.args.args) - len(node.args.defaults):]}
            local -= {a.arg for a in node.args.kwonlyargs}
    local -= set(keep)
    words = rng.sample(WORDS, k=min(len(WORDS), len(local)))
    mapping = {name: f"{words[i % len(words)]}{i}" for i, name in enumerate(sorted(local))}
    return ast.unparse(_Renamer(mapping).visit(tree)) + "\n"


def reformat(source: str, rng: random.Random, keep: set[str] = frozenset()) -> str:
    """Printed again from the syntax tree (quotes, spacing, parentheses, line breaks), indented by two."""
    lines = ast.unparse(ast.parse(source)).splitlines()
    out = []
    for line in lines:
        stripped = line.lstrip(" ")
        depth = (len(line) - len(stripped)) // 4
        out.append("  " * depth + stripped.replace(", ", " , ").replace(" = ", "="))
    return "\n".join(out) + "\n"


def comment(source: str, rng: random.Random, keep: set[str] = frozenset()) -> str:
    """Comments on most lines, a docstring of one's own in every function, a blank line here and there."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            node.body = [ast.Expr(ast.Constant(f"My own {rng.choice(['version', 'take', 'code'])}: "
                                               f"{rng.choice(['step by step', 'as in class', 'see notes'])}."))] + body
    notes = ["# compute it", "# here we go", "# important!", "# see the lecture", "# shapes check out", "# TODO tidy"]
    out = []
    for line in ast.unparse(tree).splitlines():
        if line.strip() and rng.random() < 0.7 and not line.rstrip().endswith(("'", '"')):
            line = f"{line}  {rng.choice(notes)}"
        out.append(line)
        if rng.random() < 0.2:
            out.append("")
    return "# my solution\n" + "\n".join(out) + "\n"


def _touches(statement: ast.stmt) -> tuple[set[str], set[str]]:
    read, written = set(), set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else written).add(node.id)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            base = node
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                written.add(base.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_"):
            if isinstance(node.func.value, ast.Name):
                written.add(node.func.value.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            written.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            written.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return read, written


def _shuffle_block(statements: list[ast.stmt], rng: random.Random) -> list[ast.stmt]:
    """Adjacent independent statements swapped, a few passes over the block."""
    statements = list(statements)
    for _ in range(3):
        for i in range(len(statements) - 1):
            a, b = statements[i], statements[i + 1]
            if any(isinstance(s, (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.Expr)) for s in (a, b)):
                continue
            (read_a, written_a), (read_b, written_b) = _touches(a), _touches(b)
            if not (written_a & (read_b | written_b)) and not (written_b & read_a) and rng.random() < 0.7:
                statements[i], statements[i + 1] = b, a
    return statements


def reorder(source: str, rng: random.Random, keep: set[str] = frozenset()) -> str:
    """Independent statements of every block in another order (never one that changes what the code does)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and all(isinstance(s, ast.stmt) for s in block):
                setattr(node, name, _shuffle_block(block, rng))
    return ast.unparse(tree) + "\n"


METHODS_AS_FUNCTIONS = {"exp", "log", "sum", "amax", "argmax", "matmul", "sqrt", "tanh", "transpose", "unsqueeze"}


class _Edits(ast.NodeTransformer):
    """``x.exp()`` -> ``torch.exp(x)`` for a few tensor methods, and ``return <expression>`` -> a temporary."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr in METHODS_AS_FUNCTIONS and \
                not (isinstance(node.func.value, ast.Name) and node.func.value.id in {"torch", "F", "nn", "math", "np"}):
            return ast.Call(ast.Attribute(ast.Name("torch", ast.Load()), node.func.attr, ast.Load()),
                            [node.func.value, *node.args], node.keywords)
        return node

    def _body(self, statements):
        out = []
        for statement in statements:
            if isinstance(statement, ast.Return) and statement.value is not None and \
                    not isinstance(statement.value, (ast.Name, ast.Tuple, ast.Constant)):
                out += [ast.Assign([ast.Name("result_", ast.Store())], statement.value, lineno=0),
                        ast.Return(ast.Name("result_", ast.Load()))]
            else:
                out.append(statement)
        return out

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        node.body = self._body(node.body)
        return node


def edit(source: str, rng: random.Random, keep: set[str] = frozenset()) -> str:
    """Small rewrites that keep what the code does: tensor methods called as torch functions, returned
    expressions put in a temporary first."""
    return ast.unparse(ast.fix_missing_locations(_Edits().visit(ast.parse(source)))) + "\n"


class _Rewrites(ast.NodeTransformer):
    """Operands of ``*`` and ``+`` swapped, and an assert of one's own at the top of every function."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, (ast.Mult, ast.Add)):
            node.left, node.right = node.right, node.left
        return node

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        arguments = [a.arg for a in node.args.args if a.arg != "self"]
        if arguments:
            start = 1 if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) else 0
            check = ast.parse(f"assert {arguments[0]} is not None, 'no input'").body[0]
            node.body.insert(start, check)
        return node


def rewrite(source: str, rng: random.Random, keep: set[str] = frozenset()) -> str:
    """Changes the normalisation does not undo: ``a * b`` written ``b * a``, an assert added to each function.
    The copy's code really differs, and its score drops below 1."""
    return ast.unparse(ast.fix_missing_locations(_Rewrites().visit(ast.parse(source)))) + "\n"


class _Variation(_Rewrites):
    """:class:`_Rewrites` at random: each swap, and each function's assert, with probability one half."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def visit_BinOp(self, node):
        return super().visit_BinOp(node) if self.rng.random() < 0.5 else self.generic_visit(node)

    def visit_FunctionDef(self, node):
        node = super().visit_FunctionDef(node) if self.rng.random() < 0.5 else self.generic_visit(node)
        arguments = [a.arg for a in node.args.args if a.arg != "self"]
        for _ in range(self.rng.randrange(3)):  # checks of one's own, between the statements
            where = self.rng.randrange(len(node.body) + 1 if not isinstance(node.body[-1], ast.Return) else len(node.body))
            check = f"assert {self.rng.choice(arguments)}.dim() >= {self.rng.randrange(4)}" if arguments else "pass"
            node.body.insert(where, ast.parse(check).body[0])
        return node


def vary(source: str, rng: random.Random) -> str:
    """One student's own variation of a style (for synthetic classes): some operands swapped, asserts of their
    own added here and there."""
    try:
        return ast.unparse(ast.fix_missing_locations(_Variation(rng).visit(ast.parse(source)))) + "\n"
    except SyntaxError:
        return source


def everything(source: str, rng: random.Random, keep: set[str] = frozenset()) -> str:
    return comment(reformat(reorder(rename(source, rng, keep), rng, keep), rng, keep), rng, keep)


DISGUISES = {"renamed": rename, "reformatted": reformat, "commented": comment, "reordered": reorder, "all four": everything,
             "edited": edit, "rewritten": rewrite,
             "all four, edited, rewritten": lambda source, rng, keep=frozenset(): everything(
                 edit(rewrite(source, rng, keep), rng, keep), rng, keep)}


def disguised(answers: dict[str, str], disguise: str, seed: int) -> dict[str, str]:
    """Every answer of a submission under one disguise (the graded names kept)."""
    rng = random.Random(seed)
    out = {}
    for grade_id, source in answers.items():
        try:
            out[grade_id] = DISGUISES[disguise](source, rng, {grade_id})
        except SyntaxError:
            out[grade_id] = source
    return out


# =============================================================================================
# A class on disk


def release_cells(assignment: str) -> list[dict]:
    return json.loads((EXERCISES / assignment / f"{assignment}.ipynb").read_text(encoding="utf-8"))["cells"]


def notebook_with(assignment: str, answers: dict[str, str], extra_cells: list[str] = ()) -> dict:
    """The released notebook (``exercises/``) with its answer cells replaced by ``answers`` (by grade id)."""
    notebook = json.loads((EXERCISES / assignment / f"{assignment}.ipynb").read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        grade_id = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    for source in extra_cells:
        notebook["cells"].append({"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
                                  "execution_count": None})
    return notebook


def release_course(root: Path, assignments: list[str]) -> Layout:
    """A course folder with ``release/<assignment>/`` as students receive it (from ``exercises/``)."""
    for assignment in assignments:
        shutil.copytree(EXERCISES / assignment, root / "release" / assignment, dirs_exist_ok=True)
    return Layout(root, REPOSITORY / "solutions")


def write_class(root: Path, assignment: str, submissions: dict[str, dict[str, str] | dict]) -> Layout:
    """A course at ``root`` with each student's answers (or a whole notebook, a dict with "cells") submitted."""
    layout = release_course(root, [assignment])
    for student, answers in submissions.items():
        notebook = answers if "cells" in answers else notebook_with(assignment, answers)
        folder = root / "submitted" / student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{assignment}.ipynb").write_text(json.dumps(copy.deepcopy(notebook), ensure_ascii=False),
                                                    encoding="utf-8")
    return layout

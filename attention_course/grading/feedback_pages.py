"""Feedback pages that work offline, one self-contained file each.

nbgrader's feedback template loads MathJax 2 from a CDN; students read the pages offline, downloaded one
by one from the LMS. :func:`typeset` removes that loader and typesets the math to SVG in the page itself
(Node and the MathJax 3 that ``make book`` installs in ``web/``): no script, and a small page. Where that
cannot run, :func:`offline_math` inlines MathJax 3 (SVG output, no font files) into the page instead,
which works offline too but adds 2 MB. :func:`problem_page` is the page a student gets when their
submission could not be graded, and :func:`count_line` is the one-line summary that
``attention-course feedback`` prints.
"""

from __future__ import annotations

import functools
import html as html_escaping
import json
import re
import shutil
import subprocess
from pathlib import Path

from attention_course.i18n import N_, language_of, translator

REPOSITORY = Path(__file__).resolve().parents[2]
MATHJAX_BUNDLE = REPOSITORY / "web" / "node_modules" / "mathjax" / "es5" / "tex-svg-full.js"
TYPESETTER = REPOSITORY / "web" / "typeset-math.js"
INLINED_ID = "attention-course-mathjax"  # the id of the inlined bundle's <script>: one per page

# The TeX settings of the feedback pages (the delimiters nbconvert's MathJax 2 configuration used), shared
# with web/typeset-math.js. The full bundle holds every TeX extension (\boldsymbol, \cancel …); inlined,
# it has no path to load anything from later: 'autoload' and 'require' are off, and an unknown macro shows
# as an error in that one formula.
TEX_SETTINGS = REPOSITORY / "web" / "mathjax-tex.json"


def mathjax_config() -> str:
    tex = {**json.loads(TEX_SETTINGS.read_text(encoding="utf-8")), "packages": {"[-]": ["autoload", "require"]}}
    return "window.MathJax = " + json.dumps({"tex": tex, "svg": {"fontCache": "global"}}, indent=1) + ";"


_SCRIPT = re.compile(r"<script\b(?P<attrs>[^>]*)>(?P<body>.*?)</script\s*>", re.IGNORECASE | re.DOTALL)
_SRC = re.compile(r"""\bsrc\s*=\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s>]+))""", re.IGNORECASE)
_REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)  # http://, https://, //host
_MATHJAX_2_CONFIG = re.compile(r"""\btype\s*=\s*["']?text/x-mathjax-config""", re.IGNORECASE)
_INLINED = re.compile(rf"""<script\b[^>]*\bid\s*=\s*["']?{INLINED_ID}["'\s>]""", re.IGNORECASE)
_HEAD_END = re.compile(r"</head\s*>", re.IGNORECASE)
_DOCTYPE = re.compile(r"^\s*(?:<!doctype[^>]*>)?", re.IGNORECASE)


def mathjax_script() -> Path:
    """The MathJax 3 bundle that the pages inline, as ``make book`` installs it."""
    if not MATHJAX_BUNDLE.is_file():
        raise FileNotFoundError(
            f"MathJax is not installed ({MATHJAX_BUNDLE} is missing): run `make book`, "
            "which runs `npm ci` in web/, then generate the feedback again."
        )
    return MATHJAX_BUNDLE


@functools.lru_cache(maxsize=4)
def _inlinable_source(path: Path) -> str:
    return script_safe(path.read_text(encoding="utf-8"))


def script_safe(source: str) -> str:
    """``source`` rewritten so that an HTML parser reads it whole inside one ``<script>`` element.

    ``</script`` would end the element, and ``<script`` (after ``<!--``) would keep it from ending; both
    are rewritten with escapes that mean the same inside JavaScript strings, regular expressions,
    template literals and comments.
    """
    source = re.sub(r"</(script)", r"<\\/\1", source, flags=re.IGNORECASE)
    return re.sub(r"<(s)(cript)", lambda m: "<\\x" + format(ord(m[1]), "02x") + m[2], source, flags=re.IGNORECASE)


def _is_remote_mathjax(attrs: str, body: str) -> bool:
    src = _SRC.search(attrs)
    if src:
        url = src["dq"] or src["sq"] or src["bare"] or ""
        return bool(_REMOTE.match(url)) and "mathjax" in url.lower()
    return bool(_MATHJAX_2_CONFIG.search(attrs)) or "MathJax.Hub.Config" in body


def drop_remote_mathjax(html: str) -> str:
    """``html`` without its remote MathJax loaders and MathJax 2's configuration (other scripts are kept)."""
    def drop(match: re.Match[str]) -> str:
        if INLINED_ID in match["attrs"]:
            return match[0]
        return "" if _is_remote_mathjax(match["attrs"], match["body"]) else match[0]

    return _SCRIPT.sub(drop, html)


def page_chrome_in(html: str, language: str) -> str:
    """nbgrader's feedback page with the labels of its template (scores, cell kinds, comments) in ``language``,
    the language of the notebook the page shows; the notebook's own content is left as it is."""
    tr = translator(language, "grading")
    if language_of(language) == "en":
        return html
    score = tr("Score: {score} / {points}")
    html = re.sub(r"\(Score: (-?[\d.]+) / ([\d.]+)\)",
                  lambda m: "（" + score.format(score=m[1], points=m[2]) + "）", html)
    html = re.sub(r"(<span class=\"pull-right\">\s*)Score: ([\d.]+) / ([\d.]+)",
                  lambda m: m[1] + score.format(score=m[2], points=m[3]), html)
    html = re.sub(r"Late submission penalty \(Score: (-[\d.]+)\)",
                  lambda m: tr("Late submission penalty ({score})").format(score=m[1]), html)
    for label in (N_("Test cell"), N_("Coding free-response"), N_("Written response"), N_("Task"), N_("Comment")):
        html = html.replace(f">{label}</a>", f">{tr(label)}</a>")
    for label in (N_("Student's answer"), N_("Student's task")):
        html = html.replace(f'<span class="nbgrader-label">{label}</span>', f'<span class="nbgrader-label">{tr(label)}</span>')
    grade_cell, top, comments = tr("Grade cell:"), tr("(Top)"), tr("Comments:")
    html = html.replace('<span class="nbgrader-label">Grade cell: <code>',
                        '<span class="nbgrader-label">' + grade_cell + " <code>")
    html = html.replace(">(Top)</a>", ">" + top + "</a>")
    return html.replace("<b>Comments:</b>", "<b>" + comments + "</b>")


WRAP_ID = "course-wrapped-outputs"
_WRAP_STYLE = (f'<style id="{WRAP_ID}">.output_area pre, .output_subarea pre '
               "{ white-space: pre-wrap; overflow-wrap: anywhere; }</style>\n")


def wrapped_outputs(html: str) -> str:
    """``html`` with its outputs' long lines wrapped (nbgrader's page scrolls them sideways, where a phone
    hides the end of a message: the expected value, the hint). Idempotent."""
    if f'id="{WRAP_ID}"' in html:
        return html
    head_end = _HEAD_END.search(html)
    return html[:head_end.start()] + _WRAP_STYLE + html[head_end.start():] if head_end else _WRAP_STYLE + html


def typeset(pages: list[Path], batch: int = 200) -> list[Path]:
    """Typeset the math of nbgrader's feedback ``pages`` to SVG, in place, with Node and the MathJax of
    ``web/`` (one process per ``batch`` pages): the pages then need no script to show their math, and
    weigh a few hundred KB instead of the 2 MB of an inlined MathJax. Remote MathJax loaders are removed
    first. Returns the pages that could not be typeset (all of them without Node): give those
    :func:`offline_math`."""
    for page in pages:
        page.write_text(wrapped_outputs(drop_remote_mathjax(page.read_text(encoding="utf-8"))), encoding="utf-8")
    node = shutil.which("node")
    if node is None or not TYPESETTER.is_file() or not MATHJAX_BUNDLE.is_file():
        return list(pages)
    failed: list[Path] = []
    for start in range(0, len(pages), batch):
        chunk = pages[start:start + batch]
        run = subprocess.run([node, str(TYPESETTER), *map(str, chunk)], capture_output=True, text=True, timeout=900)
        if run.returncode == 0:
            continue
        named = {line.split(": ", 1)[0] for line in run.stdout.splitlines()}
        failed += [page for page in chunk if str(page) in named] if run.returncode == 1 else chunk
    return failed


def offline_math(html: str) -> str:
    """``html`` with remote MathJax loaders and MathJax 2's configuration removed, and MathJax 3 inlined.

    Idempotent: a page that already has the inlined bundle keeps it and gets no second copy.
    """
    html = drop_remote_mathjax(html)
    if _INLINED.search(html):
        return html
    scripts = (
        f'<script id="{INLINED_ID}-config">\n{mathjax_config()}\n</script>\n'
        f'<script id="{INLINED_ID}">{_inlinable_source(mathjax_script())}</script>\n'
    )
    head_end = _HEAD_END.search(html)
    doctype = _DOCTYPE.match(html)  # no </head>: the implied <head>, right after any doctype
    at = head_end.start() if head_end else (doctype.end() if doctype else 0)
    return html[:at] + scripts + html[at:]


_PAGE_STYLE = """
:root { color-scheme: light dark; --fg: #1b1b1b; --bg: #ffffff; --muted: #555555; --box: #f3f4f6;
        --accent: #b42318; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e8e8e8; --bg: #16181c; --muted: #b0b0b0; --box: #23262d; --accent: #ff8a80; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
       font: 1.0625rem/1.6 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif; }
main { max-width: 40rem; margin: 0 auto; padding: 1.25rem 1rem 3rem; }
h1 { font-size: 1.5rem; line-height: 1.3; margin: 0.5rem 0 1rem; }
h2 { font-size: 1.15rem; margin: 1.75rem 0 0.5rem; }
.score { font-size: 1.15rem; font-weight: 700; color: var(--accent); }
ul, ol { padding-left: 1.4rem; }
li { margin: 0.35rem 0; overflow-wrap: anywhere; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 0.95em;
       background: var(--box); padding: 0.1em 0.3em; border-radius: 0.25rem; overflow-wrap: anywhere; }
.muted { color: var(--muted); }
"""


def problem_page(assignment: str, student_label: str, reasons: list[str], files: list[str],
                 notebook: str | None = None) -> str:
    """A standalone page telling a student why their submission for ``assignment`` (its notebook ``notebook``,
    by default ``<assignment>.ipynb``) was not graded."""
    a = html_escaping.escape(assignment)
    notebook = html_escaping.escape(notebook or f"{assignment}.ipynb")
    student = html_escaping.escape(student_label)
    reason_items = "\n".join(f"    <li>{html_escaping.escape(reason)}</li>" for reason in reasons)
    why = f"  <ul>\n{reason_items}\n  </ul>" if reasons else '  <p class="muted">No reason was recorded.</p>'
    file_items = "\n".join(f"    <li><code>{html_escaping.escape(name)}</code></li>" for name in files)
    received = f"  <ul>\n{file_items}\n  </ul>" if files else "  <p>No files.</p>"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{a}: submission not graded</title>
<style>{_PAGE_STYLE}</style>
</head>
<body>
<main>
  <h1>{a}: your submission could not be graded</h1>
  <p class="muted">Feedback for {student}</p>
  <p class="score">Score: 0 points</p>
  <h2>Why</h2>
{why}
  <h2>What the grader received</h2>
{received}
  <h2>What to do</h2>
  <ol>
    <li>Open the assignment's notebook, <code>{notebook}</code>, in JupyterLab and save it.</li>
    <li>Download it with <strong>File &gt; Download</strong>; keep the name <code>{notebook}</code>.</li>
    <li>Before you submit, run <code>attention-course check {notebook}</code>:
      it checks the notebook as the grader will, on the visible cases, and should pass.</li>
    <li>Submit that notebook, <code>{notebook}</code>.</li>
  </ol>
  <p>If something is unclear or the check fails in a way you cannot fix, ask the instructor.</p>
</main>
</body>
</html>
"""


def count_line(written: int, skipped: dict[str, int]) -> str:
    """``feedback written for 28 students; skipped 2 students: never graded: 1, no submission: 1``."""
    line = f"feedback written for {written} student{'' if written == 1 else 's'}"
    reasons = {reason: count for reason, count in skipped.items() if count}
    if not reasons:
        return line
    total = sum(reasons.values())
    details = ", ".join(f"{reason}: {count}" for reason, count in reasons.items())
    return f"{line}; skipped {total} student{'' if total == 1 else 's'}: {details}"

"""The class report page: ``reports/<assignment>/index.html``, one offline file an instructor opens after
grading (on a laptop or a phone), with CSV files beside it.

What it shows, in the language of the course's release (``--language`` to choose): the score
distribution; each test's pass rate, discrimination and most common failures (:mod:`class_report`); the
CPU time of the submissions; the flagged submissions and why; the written answers awaiting a manual
grade; pairs of students whose code or trained weights are alike (:mod:`similarity`); and what the last
regrade changed (:mod:`regrade`). The pictures are SVG drawn by the course's own figures
(:mod:`attention_course.figures.class_report`), in the page itself: no script, no network, no font to
load. Nothing in it depends on the time it was written: the same grades give the same page.
"""

from __future__ import annotations

import csv
import html
import io
from pathlib import Path

from attention_course.grading.class_report import (ClassData, CheckStatistics, check_statistics, gather,
                                                   timing)
from attention_course.grading.layout import Layout, write_whole
from attention_course.grading.regrade import RegradeReport
from attention_course.i18n import language_of, translator

GOOD, FAIR = 0.3, 0.1  # discrimination: at least GOOD tells strong work from weak well; below FAIR, hardly
SHOWN_PAIRS = 20  # pairs of alike code with their code side by side


def release_language(layout: Layout, assignment: str) -> str:
    """The language the assignment was released in: its notebooks' ``attention_course.language`` metadata
    ("en" where none says)."""
    for notebook in layout.notebooks(assignment):
        tag = (layout.released(assignment, notebook).metadata.get("attention_course") or {}).get("language")
        if tag:
            return language_of(tag)
    return "en"


def folder_of(layout: Layout, assignment: str) -> Path:
    return layout.root / "reports" / assignment


def write_report_page(layout: Layout, assignment: str, data: ClassData | None = None, *, language: str | None = None,
                      against: Path | None = None) -> Path:
    """Write ``reports/<assignment>/index.html`` and the CSV files beside it (``checks.csv``,
    ``failures.csv``, ``similarity.csv``, ``regrade.csv``); returns the page. ``against``: a folder of
    earlier classes to compare the code with (see :func:`similarity.find_similar`)."""
    from attention_course.grading.similarity import find_similar, write_similarity_csv

    data = data if data is not None else gather(layout, assignment)
    lang = language_of(language) if language else release_language(layout, assignment)
    folder = folder_of(layout, assignment)
    statistics = check_statistics(data)
    similar = find_similar(layout, assignment, against)
    regrade = RegradeReport.load(layout, assignment)
    _write_csv(folder / "checks.csv", ["test", "points", "graded", "passed", "pass_rate", "discrimination"],
               [[s.grade_id, f"{s.points:g}", s.graded, s.passed, f"{s.pass_rate:.3f}",
                 "" if s.discrimination is None else f"{s.discrimination:.3f}"] for s in statistics])
    _write_csv(folder / "failures.csv", ["test", "count", "failure", "students", "example"],
               [[s.grade_id, f.count, f.pattern, " ".join(f.students), f.example]
                for s in statistics for f in s.failures])
    write_similarity_csv(similar, folder / "similarity.csv")
    _write_csv(folder / "regrade.csv", ["student", "before", "after", "change", "why", "tests"],
               [[c.student, f"{c.before:g}", f"{c.after:g}", f"{c.change:+g}", "; ".join(c.why),
                 "; ".join(f"{k.grade_id} {k.before:g}->{k.after:g}" for k in c.checks)]
                for c in (regrade.changed if regrade else [])])
    page = folder / "index.html"
    write_whole(page, render(data, statistics, similar, regrade, lang))
    return page


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    write_whole(path, out.getvalue(), encoding="utf-8-sig")  # (the BOM: spreadsheets then read UTF-8)


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def discrimination_word(value: float | None, tr) -> str:
    if value is None:
        return tr("undefined (everyone passed, or nobody did)")
    if value < 0:
        return tr("negative: stronger students fail it more; look at this test")
    if value < FAIR:
        return tr("weak")
    return tr("fair") if value < GOOD else tr("good")


def render(data: ClassData, statistics: list[CheckStatistics], similar, regrade: RegradeReport | None, lang: str) -> str:
    """The page's HTML (see the module's text)."""
    from attention_course.figures import class_report as figures

    tr = translator(lang, "grading", strict=True)
    rows = data.rows
    parts: list[str] = []
    title = tr("Class report: {assignment}").format(assignment=data.assignment)
    scores = [row.score for row in rows]
    max_score = max((row.max_score for row in rows), default=0.0)
    flagged = [row for row in rows if row.notes]
    awaiting = [row for row in rows if row.awaiting]
    parts.append(f"<h1>{_e(title)}</h1>")
    if not rows:
        nobody = tr("No student has a grade yet: run `attention-course grade` first.")
        parts.append(f"<p>{_e(nobody)}</p>")
    else:
        ordered = sorted(scores)
        median = ordered[len(ordered) // 2] if len(ordered) % 2 else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2
        parts.append("<p>" + _e(tr("{students} students graded; mean {mean:.2f}, median {median:g} of {total:g} points; "
                                   "{flagged} flagged; {awaiting} with written answers awaiting a manual grade.").format(
            students=len(rows), mean=sum(scores) / len(rows), median=median, total=max_score,
            flagged=len(flagged), awaiting=len(awaiting))) + "</p>")
        parts.append(_nav(tr))
        # -- the distribution
        parts.append(_h2("scores", tr("Scores")))
        parts.append(_figure(figures.draw_score_distribution(scores, max_score, lang),
                             tr("How many students got each score.")))
        # -- the tests
        parts.append(_h2("tests", tr("Tests")))
        parts.append("<p>" + _e(tr(
            "Discrimination is the point-biserial correlation between passing a test and the points of all the "
            "other tests: from {good:g} up, the test tells strong work from weak well; below {fair:g}, hardly; "
            "below 0, the students who pass it do worse elsewhere.").format(good=GOOD, fair=FAIR)) + "</p>")
        parts.append(_figure(figures.draw_pass_rates(
            [s.grade_id for s in statistics], [s.pass_rate for s in statistics],
            [s.discrimination is not None and s.discrimination < FAIR for s in statistics], lang),
            tr("The share of students who passed each test (red: weak or negative discrimination).")))
        parts.append(_table([tr("test"), tr("points"), tr("passed"), tr("discrimination")],
                            [[s.grade_id, f"{s.points:g}", f"{s.passed} / {s.graded} ({100 * s.pass_rate:.0f}%)",
                              ("" if s.discrimination is None else f"{s.discrimination:+.2f} ")
                              + discrimination_word(s.discrimination, tr)] for s in statistics]))
        for s in statistics:
            if not s.failures:
                continue
            summary = (tr("{test}: {count} failed, in {kinds} ways") if len(s.failures) > 1
                       else tr("{test}: {count} failed, all in the same way")).format(
                test=s.grade_id, count=s.graded - s.passed, kinds=len(s.failures))
            parts.append(f"<details><summary>{_e(summary)}</summary>")
            for failure in s.failures[:10]:
                who = tr("{count} students") if failure.count > 1 else tr("1 student")
                parts.append("<div class='failure'><p><b>" + _e(who.format(count=failure.count))
                             + "</b> " + _e(tr("e.g. {students}").format(students=", ".join(failure.students)))
                             + f"</p><pre>{_e(failure.example)}</pre></div>")
            if len(s.failures) > 10:
                parts.append("<p>" + _e(tr("… and {more} more ways: see failures.csv").format(more=len(s.failures) - 10)) + "</p>")
            parts.append("</details>")
        # -- time
        spent = timing(rows)
        parts.append(_h2("time", tr("Time")))
        parts.append("<p>" + _e(tr("CPU seconds per submission in the sandbox: median {median:.1f}, 90th percentile "
                                   "{p90:.1f}, most {most:.1f}; wall seconds: median {wall:.1f}, most {wall_most:.1f}.").format(
            median=spent.median_cpu, p90=spent.p90_cpu, most=spent.max_cpu, wall=spent.median_wall,
            wall_most=spent.max_wall)) + "</p>")
        parts.append(_figure(figures.draw_cpu_seconds([row.cpu_seconds for row in rows], lang),
                             tr("How long the submissions ran (CPU seconds).")))
        parts.append(_table([tr("slowest"), tr("CPU seconds")], [[s, f"{c:.1f}"] for s, c in spent.slowest]))
        # -- flagged, awaiting
        none = _p(tr("None."))
        parts.append(_h2("flagged", tr("Flagged submissions")))
        parts.append(_table([tr("student"), tr("name"), tr("why")],
                            [[row.student, row.name, "; ".join(row.notes)] for row in flagged]) if flagged else none)
        parts.append(_h2("awaiting", tr("Written answers awaiting a manual grade")))
        parts.append(_table([tr("student"), tr("answers")], [[row.student, "; ".join(row.awaiting)] for row in awaiting])
                     if awaiting else none)
    parts.append(_similarity(similar, tr))
    parts.append(_regrade(regrade, tr))
    return _page(title, "\n".join(parts), lang)


def _similarity(similar, tr) -> str:
    """The alike work, one row a pair of students (their alike functions in it), flagged pairs first; the
    first pairs open to their code side by side."""
    parts = [_h2("similar", tr("Alike work")), _p(similar.method)]
    students: dict[tuple[str, str], list] = {}
    for pair in similar.pairs:
        students.setdefault((pair.student_a, pair.student_b), []).append(pair)
    ranked = sorted(students.items(), key=lambda item: (not any(p.flagged for p in item[1]),
                                                        -max(p.score for p in item[1]), item[0]))
    flagged = [key for key, pairs in ranked if any(p.flagged for p in pairs)]
    parts.append(_p(tr("{flagged} pairs of students flagged (threshold {threshold:.2f}); similarity.csv lists "
                       "{listed} alike functions.").format(flagged=len(flagged), threshold=similar.threshold,
                                                           listed=len(similar.pairs))))
    shown = ranked[:SHOWN_PAIRS]
    if shown:
        parts.append(_table([tr("students"), tr("alike functions (similarity)"), ""],
                            [[f"{a} · {b}", ", ".join(f"{p.function} {p.score:.2f}" for p in pairs),
                              tr("flagged") if any(p.flagged for p in pairs) else ""] for (a, b), pairs in shown]))
    for (a, b), pairs in shown:
        code = [p for p in pairs if p.kind == "code"]
        if not code:
            continue
        parts.append(f"<details><summary>{_e(f'{a} · {b}')}</summary>")
        for pair in code:
            parts.append(f"<p>{_e(f'{pair.function} ({pair.score:.2f})')}</p><div class='pair'>"
                         f"<figure><figcaption>{_e(a)}</figcaption><pre>{_e(pair.code_a)}</pre></figure>"
                         f"<figure><figcaption>{_e(b)}</figcaption><pre>{_e(pair.code_b)}</pre></figure></div>")
        parts.append("</details>")
    return "\n".join(parts)


def _regrade(regrade: RegradeReport | None, tr) -> str:
    parts = [_h2("regrade", tr("What the last regrade changed"))]
    if regrade is None or not regrade.regraded:
        nobody = tr("The last batch graded no one again.")
        parts.append(f"<p>{_e(nobody)}</p>")
        return "\n".join(parts)
    parts.append("<p>" + _e(tr("{regraded} students graded again; {changed} of them changed.").format(
        regraded=regrade.regraded, changed=len(regrade.changed))) + "</p>")
    if regrade.changed:
        parts.append(_table([tr("student"), tr("before"), tr("after"), tr("why"), tr("tests")],
                            [[c.student, f"{c.before:g}", f"{c.after:g} ({c.change:+g})", "; ".join(c.why),
                              "; ".join(f"{k.grade_id} {k.before:g} → {k.after:g}" for k in c.checks)]
                             for c in regrade.changed]))
    return "\n".join(parts)


def _h2(anchor: str, text: str) -> str:
    return f'<h2 id="{anchor}">{_e(text)}</h2>'


def _p(text: str) -> str:
    return f"<p>{_e(text)}</p>"


def _nav(tr) -> str:
    links = [("scores", tr("Scores")), ("tests", tr("Tests")), ("time", tr("Time")), ("flagged", tr("Flagged submissions")),
             ("awaiting", tr("Written answers awaiting a manual grade")), ("similar", tr("Alike work")),
             ("regrade", tr("What the last regrade changed"))]
    return "<nav><ul>" + "".join(f'<li><a href="#{anchor}">{_e(text)}</a></li>' for anchor, text in links) + "</ul></nav>"


def _figure(svg: str, caption: str) -> str:
    return f'<figure class="chart" role="img" aria-label="{_e(caption)}">{svg}<figcaption>{_e(caption)}</figcaption></figure>'


def _table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th scope='col'>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<div class='scroll' tabindex='0'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


STYLE = """
body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", "Noto Sans CJK SC", "WenQuanYi Micro Hei", sans-serif;
       max-width: 60rem; margin: 0 auto; padding: 1rem; color: #1b1b1b; background: #fff; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
nav ul { display: flex; flex-wrap: wrap; gap: .25rem 1rem; padding: 0; list-style: none; }
a { color: #0b57d0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: .95rem; }
th, td { text-align: left; vertical-align: top; padding: .3rem .5rem; border-bottom: 1px solid #e5e5e5; }
figure { margin: 1rem 0; } figure.chart svg { max-width: 100%; height: auto; }
figcaption { font-size: .9rem; color: #555; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f8fa; padding: .5rem; font-size: .85rem; }
details { margin: .5rem 0; } summary { cursor: pointer; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: .5rem; }
.pair figure { margin: 0; min-width: 0; }
@media (max-width: 40rem) { .pair { grid-template-columns: 1fr; } body { padding: .5rem; } }
:focus-visible { outline: 3px solid #0b57d0; outline-offset: 2px; }
"""


def _page(title: str, body: str, lang: str) -> str:
    tag = "zh-CN" if lang == "zh" else "en"
    return (f'<!DOCTYPE html>\n<html lang="{tag}">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n")

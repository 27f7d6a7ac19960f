"""Intake: who the students are and what they handed in.

An LMS export (Moodle or Canvas naming, see :mod:`lms`) is unpacked into nbgrader's
``submitted/<student>/<assignment>/``, one notebook chosen per released notebook; a participant list adds
whoever handed in nothing. What the export said of each student (late, a group, other files, why a file
was chosen or none was) is kept in ``grader/intake/<assignment>.json`` and becomes the notes the
instructor reads beside each grade (:func:`notes_of`).
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

from attention_course.grading import lms
from attention_course.grading.grade import NotebookResult
from attention_course.grading.layout import Layout, tested_ids, write_json
from attention_course.grading.notebook_translation import TRANSLATED, language_of_file, translated_name


def students(layout: Layout, assignment: str) -> list[str]:
    """Everyone with a submission folder, and everyone on the participant list given for this assignment."""
    submitted = layout.root / "submitted"
    folders = {p.name for p in submitted.iterdir() if (p / assignment).is_dir()} if submitted.is_dir() else set()
    return sorted(folders | set(read_intake(layout, assignment).get("roster", {})))


def read_intake(layout: Layout, assignment: str) -> dict:
    """What the LMS exports and participant lists said of each student: {"students": {key: …}, "roster": {key: …}}."""
    path = layout.intake_path(assignment)
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return {"students": data.get("students", {}), "roster": data.get("roster", {}),
            "roster_table": data.get("roster_table")}


def people(layout: Layout, assignment: str) -> dict[str, lms.Student]:
    """Every known student's LMS identity (the participant list's details over the export's)."""
    intake = read_intake(layout, assignment)
    found = {key: lms.student_from_record(record) for key, record in intake["students"].items()}
    for key, record in intake["roster"].items():
        listed = lms.student_from_record(record)
        known = found.setdefault(key, listed)
        for name in ("name", "email", "username", "sis_user_id", "sis_login_id", "section"):
            if getattr(listed, name):
                setattr(known, name, getattr(listed, name))
    return found


def roster_table(layout: Layout, assignment: str):
    table = read_intake(layout, assignment).get("roster_table")
    return tuple(table) if table else None


def import_roster(layout: Layout, path: Path, assignment: str) -> list[lms.Student]:
    """Read a participant list (Moodle grading worksheet, Canvas gradebook export) for ``assignment``."""
    table = lms.read_roster_table(path)
    listed = lms.roster_students(table)
    intake = read_intake(layout, assignment)
    intake["roster"] = {s.key: lms.student_record(s) for s in listed}
    intake["roster_table"] = list(table)
    write_json(layout.intake_path(assignment), intake)
    return listed


def import_zip(layout: Layout, archive: Path, assignment: str) -> "lms.Export":
    """Unpack an LMS export (Moodle or Canvas naming) into ``submitted/<student>/<assignment>/``.

    Each student's folder is replaced by what the export holds: the notebook chosen to grade (see
    :func:`lms.choose`), saved under the release's name, and its time. What else was submitted, why a
    file was chosen and why nothing was, are kept for the summary and the report."""
    export = lms.read_export(archive)
    notebooks = layout.notebooks(assignment)
    released = {nb: layout.released(assignment, nb) for nb in notebooks}
    intake = read_intake(layout, assignment)
    roster = {key: lms.student_from_record(record) for key, record in intake["roster"].items()}
    for key, student in sorted(export.students.items()):
        record = lms.student_record(student)
        record.update(graded={}, others=[], problems=[])
        chosen: dict[str, lms.Received] = {}
        remaining = list(student.files)
        for nb in notebooks:
            choice = choose_language(remaining if len(notebooks) > 1 else student.files, nb, tested_ids(released[nb]),
                                     layout.released_languages(assignment, nb))
            if choice.file is None:
                record["problems"].append(choice.problem)
                continue
            remaining = [f for f in remaining if f is not choice.file]
            chosen[nb] = choice.file
            record["graded"][nb] = choice.why
            record["attachment"] = choice.file.order if student.lms == "canvas" else 0
        if len(notebooks) == 1:
            record["others"] = choice.others if choice.file is not None else []
        else:
            record["others"] = sorted(f"{f.name} (in {f.inside})" if f.inside else f.name for f in remaining)
        group, members = lms.group_of(student, roster)
        if group:  # graded for each member, each with their own identity (and feedback entry)
            for member in members:
                entry = {**record, **lms.student_record(roster[member]), "group": group,
                         "group_submitted_as": student.submitted_as, "submitted_as": "", "late": student.late}
                _store_submission(layout, assignment, member, chosen)
                intake["students"][member] = entry
            continue
        _store_submission(layout, assignment, key, chosen)
        intake["students"][key] = record
    write_json(layout.intake_path(assignment), intake)
    return export


LANGUAGE_NAMES = {"en": "English", "zh": "Chinese"}


def _language_of_received(received: "lms.Received", released: dict) -> str:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="language-") as folder:
        path = Path(folder) / "notebook.ipynb"
        path.write_bytes(received.data)
        language = language_of_file(path, released)
    if language == "en" and any(received.name.lower().endswith(f".{tag}.ipynb") for _, tag in TRANSLATED.values()):
        return next(lang for lang, (_, tag) in TRANSLATED.items() if received.name.lower().endswith(f".{tag}.ipynb"))
    return language


def answers_changed(data: bytes, released) -> bool:
    """Whether a submitted notebook's answer cells differ from the release's stubs (the student worked in it)."""
    try:
        cells = json.loads(data.decode("utf-8")).get("cells", [])
        given = {((c.get("metadata") or {}).get("nbgrader") or {}).get("grade_id"):
                 "".join(c.get("source")) if isinstance(c.get("source"), list) else str(c.get("source", ""))
                 for c in cells if isinstance(c, dict)}
    except (ValueError, UnicodeDecodeError, AttributeError, TypeError):
        return False
    stubs = {c.metadata["nbgrader"]["grade_id"]: c.source for c in released.cells
             if (c.metadata.get("nbgrader") or {}).get("solution")}
    return any(grade_id in given and given[grade_id].strip() != stub.strip() for grade_id, stub in stubs.items())


def choose_language(files: list["lms.Received"], notebook: str, grade_ids: set[str],
                    released: dict[str, object]) -> "lms.Choice":
    """:func:`lms.choose` among the files of each language the notebook was released in (``released``:
    {language: release}), then one of them. A student who submitted the English and the Chinese notebook is
    graded on the one whose answers differ from the release's stubs; if both (or neither) do, the newer. Either
    is graded as ``<notebook>.ipynb``, and the choice is said in the notes."""
    if len(released) == 1:
        return lms.choose(files, notebook, grade_ids)
    notebooks = [f for f in files if f.name.lower().endswith(".ipynb")]
    by_language = {lang: [f for f in notebooks if _language_of_received(f, released) == lang] for lang in released}
    choices = {}
    for lang, group in by_language.items():
        if group:
            name = notebook if lang == "en" else translated_name(notebook, lang)
            choice = lms.choose(group, name, grade_ids)  # (soft-hard.zh.ipynb is the Chinese one's own name)
            if choice.file is not None:
                choices[lang] = choice
    if not choices:
        return lms.choose(files, notebook, grade_ids)
    if len(choices) == 1:
        [(lang, choice)] = choices.items()
        choice.others = sorted(f"{f.name} (in {f.inside})" if f.inside else f.name for f in files if f is not choice.file)
        return choice
    worked = {lang: answers_changed(c.file.data, released[lang]) for lang, c in choices.items()}
    newest = lambda lang: (choices[lang].file.order, choices[lang].file.when, lang == "en")  # noqa: E731
    candidates = [lang for lang in choices if worked[lang]] or list(choices)
    chosen = max(candidates, key=newest)
    other = next(lang for lang in choices if lang != chosen)
    reason = ("its answers differ from the release's and the other's do not" if worked[chosen] and not worked[other]
              else "the newer of the two")
    choice = choices[chosen]
    choice.why = (f"{choice.file.name}, the {LANGUAGE_NAMES[chosen]} notebook (both the English and the Chinese "
                  f"notebook were submitted; graded the {LANGUAGE_NAMES[chosen]} one: {reason})")
    choice.others = sorted(f"{f.name} (in {f.inside})" if f.inside else f.name for f in files if f is not choice.file)
    return choice


def _store_submission(layout: Layout, assignment: str, student: str, chosen: dict[str, "lms.Received"]) -> None:
    """A student's folder, replaced by the notebooks chosen from an export (each under the release's name)."""
    folder = layout.submission_folder(assignment, student)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for nb, received in chosen.items():
        (folder / f"{nb}.ipynb").write_bytes(received.data)
        (folder / "timestamp.txt").write_text(received.when.strftime("%Y-%m-%d %H:%M:%S.%f %Z"))


# -- the notes beside a grade ----------------------------------------------------------------------


def intake_notes(layout: Layout, assignment: str, student: str, intake: dict) -> list[str]:
    """What the LMS export and the participant list said of the student's submission."""
    record = intake["students"].get(student)
    if record is None:
        if student in intake["roster"] and not layout.submission_folder(assignment, student).is_dir():
            return ["no submission (on the participant list, not in any export)"]
        return []
    flags = []
    if record.get("group"):
        flags.append(f"group submission of {record['group']} (downloaded as {record.get('group_submitted_as', '')}), "
                     "graded for each member")
    if record.get("late"):
        flags.append("late (the LMS marked the submission LATE)")
    flags.extend(f"{nb}.ipynb: graded the file {why}" for nb, why in record.get("graded", {}).items() if why)
    flags.extend(f"nothing gradable: {problem}" for problem in record.get("problems", []))
    if record.get("others"):
        others = record["others"]
        flags.append(f"also submitted, not graded: {', '.join(others[:8])}"
                     + (f" and {len(others) - 8} more" if len(others) > 8 else ""))
    return flags


def notes_of(layout: Layout, assignment: str, student: str, notebooks: list[str], intake: dict | None = None,
             results: dict[str, NotebookResult] | None = None) -> list[str]:
    """What the instructor should know of a student's submission: the intake's notes, then each notebook's.
    ``results``: the notebooks' saved results when the caller has them loaded already."""
    intake = intake if intake is not None else read_intake(layout, assignment)
    flags = intake_notes(layout, assignment, student, intake)
    explained = {"missing notebook"} if flags else set()  # the intake's notes say why there is none
    for nb in notebooks:
        if results is not None:
            result = results.get(nb)
        else:
            path = layout.results_path(assignment, student, nb)
            result = NotebookResult.load(path) if path.is_file() else None
        if result is not None:
            flags.extend(f"{nb}: {flag}" for flag in result.flags if flag not in explained)
    return flags


def folder_notes(folder: Path, notebooks: list[str], release_folder: Path) -> list[str]:
    """What the submission folder itself shows: a timestamp that is not one, files the grader does not use."""
    return _timestamp_flags(folder) + _extra_files(folder, notebooks, release_folder)


def adopt_renamed_notebook(folder: Path, notebooks: list[str], released) -> dict[str, str]:
    """A one-notebook assignment in nbgrader's layout without the notebook under its own name: the file
    :func:`lms.choose` picks ("soft-hard (1).ipynb", "soft-hard.IPYNB", the one notebook with the
    assignment's cells …) is copied to the expected name, which nbgrader needs, keeping the student's
    file. Returns {expected: submitted name}."""
    if len(notebooks) != 1 or not folder.is_dir():
        return {}
    expected = folder / f"{notebooks[0]}.ipynb"
    translations = {f"{translated_name(notebooks[0], lang)}.ipynb".lower() for lang in TRANSLATED} | {
        f"{notebooks[0]}.en.ipynb".lower()}
    others = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".ipynb" and p != expected
                    and p.is_file() and not p.is_symlink() and p.name.lower() not in translations)
    if expected.exists():  # graded before: the copy made then is still the student's renamed file
        same = [p for p in others if p.read_bytes() == expected.read_bytes()]
        return {notebooks[0]: same[0].name} if len(others) == 1 and same else {}
    files = [lms.Received(p.name, p.read_bytes(), when=datetime.fromtimestamp(p.stat().st_mtime, timezone.utc),
                          order=0) for p in others]
    choice = lms.choose(files, notebooks[0], tested_ids(released))
    if choice.file is None:
        return {}
    shutil.copy2(folder / choice.file.name, expected)
    return {notebooks[0]: choice.file.name}


def adopt_translation(folder: Path, notebook: str, released: dict[str, object]) -> tuple[str, list[str]]:
    """The language of the notebook to grade in nbgrader's layout, where a student may have handed in the
    Chinese notebook (``soft-hard.zh.ipynb``), the English one, or both. The one graded is always at the
    English name, which nbgrader records (nbgrader skips ``soft-hard.zh.ipynb``, a notebook its gradebook
    does not know): the Chinese file alone is copied there; with both, the one whose answers differ from
    the release's stubs is graded (if both or neither do, the newer), and an English file that gives way
    is kept as ``soft-hard.en.ipynb``. Returns (the language, the notes)."""
    expected = folder / f"{notebook}.ipynb"
    if len(released) == 1 or not folder.is_dir():
        return "en", []
    notes = []
    for lang in (lang for lang in released if lang != "en"):
        translation = folder / f"{translated_name(notebook, lang)}.ipynb"
        if not translation.is_file() or translation.is_symlink():
            continue
        set_aside = folder / f"{notebook}.en.ipynb"
        if not expected.exists():
            shutil.copy2(translation, expected)
        elif expected.read_bytes() != translation.read_bytes():
            worked = {name: answers_changed(path.read_bytes(), released[name])
                      for name, path in (("en", expected), (lang, translation))}
            newer = translation.stat().st_mtime > expected.stat().st_mtime
            chosen = lang if (worked[lang] and not worked["en"]) or (worked[lang] == worked["en"] and newer) else "en"
            reason = ("its answers differ from the release's and the other's do not" if worked[chosen] != worked[
                "en" if chosen == lang else lang] else "the newer of the two")
            if chosen == lang:
                if not set_aside.exists():
                    expected.replace(set_aside)
                shutil.copy2(translation, expected)
            notes.append(f"both the English and the Chinese notebook were submitted: graded the "
                         f"{LANGUAGE_NAMES[chosen]} one ({reason})"
                         + (f"; the English one is kept as {set_aside.name}" if chosen == lang else ""))
            if chosen == "en":
                return "en", notes
        elif set_aside.exists():
            notes.append(f"both the English and the Chinese notebook were submitted: graded the Chinese one "
                         f"(the English one is kept as {set_aside.name})")
    return language_of_file(expected, released) if expected.is_file() else "en", notes


IGNORED_FILES = {"timestamp.txt", ".DS_Store", "Thumbs.db"}


def _extra_files(folder: Path, notebooks: list[str], release_folder: Path) -> list[str]:
    """Files in the submission that the grader does not use (the release's own data files are expected)."""
    if not folder.is_dir():
        return []
    known = {f"{nb}.ipynb" for nb in notebooks} | IGNORED_FILES | (
        {p.name for p in release_folder.iterdir()} if release_folder.is_dir() else set())
    extra = sorted(p.name for p in folder.iterdir() if p.name not in known and p.name != ".ipynb_checkpoints"
                   and not (p.suffix == ".ipynb" and p.is_file()))
    if not extra:
        return []
    return [f"extra files in the submission, not used by the grader: {', '.join(extra[:10])}"
            + (f" and {len(extra) - 10} more" if len(extra) > 10 else "")]


def _timestamp_flags(folder: Path) -> list[str]:
    stamp = folder / "timestamp.txt"
    if not stamp.exists():
        return []
    if stamp.is_symlink() or stamp.stat().st_size > 100:
        return ["timestamp.txt is not a plain short file: ignored"]
    text = stamp.read_text(errors="replace").strip()
    try:
        from dateutil.parser import parse

        when = parse(text)
    except (ValueError, OverflowError):
        return [f"timestamp.txt unreadable ({text[:40]!r})"]
    now = datetime.now(when.tzinfo or None)
    if when > now:
        return [f"timestamp.txt is in the future ({text[:40]})"]
    return []

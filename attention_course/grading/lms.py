"""What Moodle and Canvas put in a submissions download, and what they take back.

This module is the one place where the learning platforms' formats are written down. It reads an
export (who submitted which files), chooses the notebook to grade, reads a participant list, and
writes the files each platform imports: a grade sheet and a zip of feedback files. It never runs
anything it reads.

Submissions download ("Download all submissions"), one entry per file:

Moodle (mod_assign), ``<prefix>_<participant id>_<plugin>`` then the student's file name:
  folder mode, Moodle >= 4.1  ``Jane Doe_123456_assignsubmission_file/soft-hard.ipynb``
  folder mode, older          ``Jane Doe_123456_assignsubmission_file_/soft-hard.ipynb``
  flat mode (no folders)      ``Jane Doe_123456_assignsubmission_file_soft-hard.ipynb``
  blind marking               ``Participant_123456_assignsubmission_file/soft-hard.ipynb``
  group submissions           ``Group A_45_assignsubmission_file/…`` (>= 4.1: the group's name and id)
                              ``Group A-Jane Doe_123456_assignsubmission_file_/…`` (older: the group's
                              name before the submitter's)
  The prefix is the full name (or "Participant") with ``_`` replaced by spaces, so the first ``_``
  ends it; accents and Chinese characters are kept. The participant id is Moodle's per-assignment
  id for the user (``assign_user_mapping``), the number in the grading worksheet's ``Identifier``
  ("Participant 123456"). Other plugins (``assignsubmission_onlinetext`` …) are listed, not graded.
  A group's submission is downloaded once; with the grading worksheet of a group assignment (its
  "Group" column) as the participant list, it is graded for every member of the group.

Canvas ("Download Submissions"), one flat file per attachment:
  ``<name>[_LATE]_<user id>_<attachment id>_<file name>``, and ``anon_<anonymous id>_<attachment id>_…``
  when grading is anonymous. ``<name>`` is the sortable name ("Doe, Jane") with everything that is
  not a letter, a digit or ``_`` removed, lower-cased (``doejane``; Unicode letters are kept:
  ``müllerzoë``, ``李雷``); some versions lower-case the ``LATE`` mark too. The attachment id changes
  with every upload, so it is never part of a student's key; a higher one is a newer upload. A
  repeated file name within one submission gets ``-1``, ``-2`` before its extension. Names are read
  back as Canvas's own re-upload reads them: ``LATE`` dropped, ``anon_<id>``, else the first two
  numbers are the user id and the attachment id.

A student is keyed on the platform's own id (``moodle-123456``, ``canvas-4711``,
``canvas-anon-x8Hq2``); the name is a label that is stored as written. Entries under ``__MACOSX/``,
``.ipynb_checkpoints/``, ``.DS_Store`` and ``Thumbs.db`` are ignored. A zip of nbgrader's exchange
folders (``alice/soft-hard.ipynb``) keys each student on the folder's name.

Participant lists (``--roster``): Moodle's grading worksheet (``Identifier``, ``Full name``,
``Email address`` …, ``Username`` where the site shows it, ``Group`` for group assignments) and Canvas's
gradebook export (``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section`` …, a "Points
Possible" row). The e-mail address and the username are what join a Moodle student's assignments into
one person (see :mod:`people`): the participant id is one per assignment.

Going back: Moodle's worksheet upload needs ``Identifier``, ``Grade`` and ``Last modified (grade)``;
Canvas's gradebook import needs ``Student``, ``ID`` … ``Section`` and then one column per assignment
(see :func:`moodle_worksheet`, :func:`canvas_gradebook`). Each carries the course total in a column the
platform's import does not read. The feedback zips are laid out in
:func:`feedback_entry`.
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

MAX_MEMBER_BYTES = 50 << 20
MAX_TOTAL_BYTES = 2 << 30


class ExportError(ValueError):
    """An export or participant list that cannot be read: the message says why, in one line."""


# -- reading a submissions download ------------------------------------------------------------------

MOODLE = re.compile(r"^(?P<prefix>[^/_]+)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)(?P<sep>_?/|_)(?P<file>.+)$")
IGNORED_NAMES = {".DS_Store", "Thumbs.db", "desktop.ini"}
IGNORED_FOLDERS = {"__MACOSX", ".ipynb_checkpoints"}


@dataclass
class Received:
    """One file a student submitted, as the export holds it."""

    name: str  # the file name as the student gave it (no folders)
    data: bytes = field(repr=False)
    when: datetime  # the time the export gives the file
    order: int = 0  # Canvas's attachment id (higher = uploaded later), else the position in the export
    inside: str = ""  # the archive the student zipped it in, if any


@dataclass
class Student:
    key: str  # the grader's (and nbgrader's) student id
    lms: str  # "moodle", "canvas" or "folder"
    lms_id: str  # the platform's id: Moodle's participant id, Canvas's user id or "anon_…", or the folder
    name: str = ""  # a label, as the platform wrote it
    late: bool = False
    group: str = ""
    email: str = ""
    username: str = ""  # Moodle's "Username", where the site shows it in the grading worksheet
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    files: list[Received] = field(default_factory=list, repr=False)
    submitted_as: str = ""  # the export entry's prefix (for the feedback zip), e.g. "Jane Doe_123456"
    attachment: int = 0  # Canvas: the id of the graded file's attachment (a feedback upload names it)


@dataclass
class Export:
    students: dict[str, Student] = field(default_factory=dict)
    ignored: Counter = field(default_factory=Counter)  # what was left out, and how many entries

    @property
    def lms(self) -> str:
        """The platforms whose naming the export follows ("moodle", "canvas", "folder"; "empty" if none)."""
        return "+".join(sorted({s.lms for s in self.students.values()})) or "empty"


def _ignored(path: PurePosixPath) -> str | None:
    if any(part in IGNORED_FOLDERS for part in path.parts):
        return next(part for part in path.parts if part in IGNORED_FOLDERS)
    if path.name in IGNORED_NAMES or path.name.startswith("._"):
        return path.name if path.name in IGNORED_NAMES else "._ (macOS metadata)"
    if path.name.endswith("-checkpoint.ipynb"):
        return ".ipynb_checkpoints"
    return None


def _when(info: zipfile.ZipInfo) -> datetime:
    try:
        return datetime(*info.date_time, tzinfo=timezone.utc)
    except ValueError:
        return datetime(1980, 1, 1, tzinfo=timezone.utc)


def identify(path: str) -> tuple[Student, str, int] | None:
    """The student an export entry belongs to, the file's name within the submission, and Canvas's
    attachment id (0 elsewhere); None when the path follows no platform's naming."""
    match = MOODLE.match(path)
    if match:
        prefix = match["prefix"].strip()
        name = "" if prefix.lower() == "participant" else prefix
        student = Student(key=f"moodle-{match['id']}", lms="moodle", lms_id=match["id"], name=name,
                          submitted_as=f"{match['prefix']}_{match['id']}")
        file = match["file"] if match["plugin"] == "file" else f"{match['plugin']}: {match['file']}"
        return student, file, 0
    return _canvas(path) if "/" not in path else None


def _canvas(path: str) -> tuple[Student, str, int] | None:
    # Read as Canvas reads its own names back (re-upload): "anon_<id>_<attachment>_…" is an anonymous
    # student, else the first two numbers are the user id and the attachment id; "LATE" (any case) before
    # them is a mark, not part of the name.
    tokens = path.split("_")
    start = 1 if tokens[0].lower() == "late" else 0
    if len(tokens) > start and tokens[start] == "anon":
        if len(tokens) < start + 4 or not re.fullmatch(r"[A-Za-z0-9]+", tokens[start + 1]) or not tokens[start + 2].isdigit():
            return None
        head, lms_id, attachment, rest = tokens[:start], f"anon_{tokens[start + 1]}", tokens[start + 2], tokens[start + 3:]
    else:
        i = next((i for i in range(len(tokens) - 2) if tokens[i].isdigit() and tokens[i + 1].isdigit()), None)
        if i is None:
            return None
        head, lms_id, attachment, rest = tokens[:i], tokens[i], tokens[i + 1], tokens[i + 2:]
    file = "_".join(rest)
    if not file:
        return None
    student = Student(key="canvas-" + lms_id.replace("_", "-"), lms="canvas", lms_id=lms_id,
                      name="_".join(t for t in head if t.lower() != "late"),
                      late=any(t.lower() == "late" for t in head),
                      submitted_as=path[: len(path) - len(file) - len(attachment) - 2])
    return student, file, int(attachment)


def read_export(archive: Path) -> Export:
    """Every student's files in an LMS download (or a zip of nbgrader's folders)."""
    if not archive.exists():
        raise ExportError(f"no such file: {archive}")
    if archive.is_dir():
        raise ExportError(f"{archive} is a folder: give the zip file the platform downloaded")
    try:
        bundle = zipfile.ZipFile(archive)
    except zipfile.BadZipFile:
        raise ExportError(f"{archive} is not a zip file (download the submissions again as one zip)") from None
    export = Export()
    total = 0
    with bundle:
        infos = [i for i in bundle.infolist() if not i.is_dir()]
        paths = [PurePosixPath(i.filename.replace("\\", "/")) for i in infos]
        # A zip the instructor made of the download's folder has one more level: look inside it.
        tops = {p.parts[0] for p in paths if len(p.parts) > 1 and not _ignored(p)}
        strip = len(tops) == 1 and all(len(p.parts) > 1 or _ignored(p) for p in paths) and not any(
            identify(str(p)) for p in paths if not _ignored(p))
        for position, (info, path) in enumerate(zip(infos, paths)):
            reason = _ignored(path)
            if reason:
                export.ignored[reason] += 1
                continue
            inner = PurePosixPath(*path.parts[1:]) if strip else path
            found = identify(str(inner))
            if found is None and len(inner.parts) > 1:  # nbgrader's folders: <student>/[<assignment>/]file
                folder = inner.parts[0]
                found = (Student(key=_safe_key(folder), lms="folder", lms_id=folder, name=folder,
                                 submitted_as=folder), inner.name, 0)
            if found is None:
                export.ignored[f"not in any platform's naming: {str(inner)[:60]}"] += 1
                continue
            student, file, attachment = found
            total += info.file_size
            if info.file_size > MAX_MEMBER_BYTES or total > MAX_TOTAL_BYTES:
                raise ExportError(f"{archive}: {info.filename} is too large for a notebook submission "
                                  f"({info.file_size:,} bytes)")
            known = export.students.setdefault(student.key, student)
            if student.late:
                known.late = True
            if not known.name and student.name:
                known.name = student.name
            data = bundle.read(info)
            received = Received(name=PurePosixPath(file).name, data=data, when=_when(info), order=attachment or position)
            known.files.extend(_unpacked(received) if file.lower().endswith(".zip") else [received])
    return export


def _unpacked(received: Received) -> list[Received]:
    """The files inside a zipped submission (one level), or the zip itself if it cannot be opened."""
    try:
        inner = zipfile.ZipFile(io.BytesIO(received.data))
    except zipfile.BadZipFile:
        return [received]
    files = []
    with inner:
        for info in inner.infolist():
            path = PurePosixPath(info.filename.replace("\\", "/"))
            if info.is_dir() or _ignored(path) or info.file_size > MAX_MEMBER_BYTES:
                continue
            files.append(Received(name=path.name, data=inner.read(info), when=_when(info), order=received.order,
                                  inside=received.name))
    return files or [received]


def _safe_key(text: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.@-]+", "-", unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode())
    return safe.strip(".-") or "student"


# -- choosing the notebook to grade ----------------------------------------------------------------


@dataclass
class Choice:
    file: Received | None
    why: str  # "" when the file is named as the assignment's notebook
    others: list[str]  # what else the student submitted (not graded)
    problem: str = ""  # why nothing could be graded


def _plain(name: str) -> str:
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return re.sub(r"[^0-9a-z]+", "", unicodedata.normalize("NFKC", stem).lower())


def _is_notebook(name: str) -> bool:
    return name.lower().endswith(".ipynb")


def _carries(received: Received, grade_ids: set[str]) -> bool:
    """Whether a file is a notebook with the assignment's graded cells in it."""
    try:
        notebook = json.loads(received.data.decode("utf-8"))
        cells = notebook.get("cells", []) if isinstance(notebook, dict) else []
        ids = {((c.get("metadata") or {}).get("nbgrader") or {}).get("grade_id") for c in cells if isinstance(c, dict)}
    except (ValueError, UnicodeDecodeError, AttributeError):
        return False
    return bool(grade_ids) and grade_ids <= ids


def choose(files: list[Received], notebook: str, grade_ids: set[str] = frozenset()) -> Choice:
    """The file to grade as ``<notebook>.ipynb``: the one named so (any case), then a renamed copy
    ("soft-hard (1).ipynb", "Copy of soft-hard.ipynb", the newest if several), then the one notebook
    that carries the assignment's graded cells, then the only notebook."""
    def label(f: Received) -> str:
        return f"{f.name} (in {f.inside})" if f.inside else f.name

    notebooks = [f for f in files if _is_notebook(f.name)]
    exact = [f for f in notebooks if f.name.lower() == f"{notebook}.ipynb".lower()]
    renamed = [f for f in notebooks if f not in exact and _plain(notebook) in _plain(f.name)]
    carrying = [f for f in notebooks if f not in exact and f not in renamed and _carries(f, grade_ids)]
    newest = lambda group: max(group, key=lambda f: (f.order, f.when, f.name))  # noqa: E731
    if exact:
        chosen, why = newest(exact), ("" if len(exact) == 1 else "the newest of several with this name")
        if chosen.name != f"{notebook}.ipynb":
            why = why or f"submitted as {label(chosen)}"
    elif renamed:
        chosen = newest(renamed)
        why = f"submitted as {label(chosen)}" + (" (the newest of several renamed copies)" if len(renamed) > 1 else "")
    elif len(carrying) == 1:
        chosen, why = carrying[0], f"submitted as {label(carrying[0])} (the notebook with this assignment's cells)"
    elif len(notebooks) == 1:
        chosen, why = notebooks[0], f"submitted as {label(notebooks[0])} (the only notebook)"
    else:
        names = ", ".join(sorted(label(f) for f in files)) or "no files"
        problem = (f"{len(notebooks)} notebooks and none named {notebook}.ipynb: {names}" if notebooks
                   else f"no notebook in the submission ({names})")
        return Choice(file=None, why="", others=sorted(label(f) for f in files), problem=problem)
    if chosen.inside and "(in " not in why:
        why = (why + "; " if why else "") + f"unpacked from {chosen.inside}"
    others = sorted(label(f) for f in files if f is not chosen)
    return Choice(file=chosen, why=why, others=others)


# -- participant lists -------------------------------------------------------------------------------


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        raise ExportError(f"no such participant list: {path}")
    raw = path.read_bytes()
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            text = raw.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.DictReader(io.StringIO(text), dialect=dialect))
    return [{(k or "").strip(): (v or "").strip() for k, v in row.items()} for row in rows]


def _participant(identifier: str) -> str | None:
    """The participant id of a Moodle worksheet's Identifier ("Participant 123456", in any language)."""
    match = re.search(r"(\d+)\s*$", identifier)
    return match[1] if match else None


def read_roster_table(path: Path) -> tuple[str, list[str], list[dict[str, str]]]:
    """("moodle" | "canvas", the header, the rows) of a participant list: a Moodle grading worksheet or a
    Canvas gradebook export. Kept whole, to be written back on export."""
    rows = _read_csv(path)
    header = list(rows[0]) if rows else []
    if "Identifier" in header:
        return "moodle", header, rows
    if {"Student", "ID"} <= set(header):
        return "canvas", header, rows
    raise ExportError(f"{path} is neither a Moodle grading worksheet (no 'Identifier' column) nor a Canvas "
                      f"gradebook export (no 'Student' and 'ID' columns); its columns: {', '.join(sorted(header))[:200]}")


def roster_students(table: tuple[str, list[str], list[dict[str, str]]]) -> list[Student]:
    """The students of a participant list read by :func:`read_roster_table`."""
    kind, _, rows = table
    students = []
    if kind == "moodle":
        for row in rows:
            participant = _participant(row["Identifier"])
            if participant is None:
                continue
            students.append(Student(key=f"moodle-{participant}", lms="moodle", lms_id=participant,
                                    name=row.get("Full name", ""), email=row.get("Email address", ""),
                                    username=row.get("Username", ""), group=row.get("Group", "")))
        return students
    for row in rows:
        if not row["ID"].isdigit():  # Canvas's "Points Possible" row, and blank lines
            continue
        students.append(Student(key=f"canvas-{row['ID']}", lms="canvas", lms_id=row["ID"], name=row["Student"],
                                sis_user_id=row.get("SIS User ID", ""), sis_login_id=row.get("SIS Login ID", ""),
                                section=row.get("Section", "")))
    return students


def group_of(student: Student, roster: dict[str, Student]) -> tuple[str, list[str]]:
    """(the group, its members' keys) when a Moodle download's entry is a group's submission, as the group
    assignment's worksheet (its "Group" column) tells; ("", []) otherwise."""
    if student.lms != "moodle":
        return "", []
    members: dict[str, list[str]] = {}
    for person in roster.values():
        if person.group:
            members.setdefault(person.group, []).append(person.key)
    listed = roster.get(student.key)
    if student.name in members and (listed is None or listed.name != student.name):  # Moodle >= 4.1: "<group>_<group id>"
        return student.name, sorted(members[student.name])
    if listed is not None and listed.group in members and student.name.startswith(f"{listed.group}-"):  # older
        return listed.group, sorted(members[listed.group])
    return "", []


def student_record(student: Student) -> dict:
    record = asdict(student)
    record.pop("files")
    return record


def student_from_record(record: dict) -> Student:
    known = set(Student.__dataclass_fields__) - {"files"}
    return Student(**{k: v for k, v in record.items() if k in known})


# -- what each platform imports ------------------------------------------------------------------------

# Moodle's offline grading worksheet: the upload needs "Identifier", "Grade" and "Last modified (grade)"
# (a row whose grade changed in Moodle after that time is skipped unless the upload allows it), matches
# "Participant <id>" rows to the assignment's participants, and skips a grade above the maximum.
MOODLE_COLUMNS = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                  "Grade can be changed", "Last modified (submission)", "Last modified (grade)"]

# Canvas's gradebook import: "Student", "ID", then optional SIS columns, ending with "Section"; each further
# column is an assignment, matched on "Title (assignment id)" or its exact title (an unknown one is offered
# as a new assignment); a "Points Possible" row sets the points.
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]

# The course total goes where each import does not look. Moodle's worksheet upload reads only "Identifier",
# "Grade", "Last modified (grade)" and the feedback plugins' columns ("Feedback comments"), so further columns
# are ignored (mod/assign/feedback/offline/importgradeslib.php). Canvas's import drops every column whose
# title contains "Current Score", "Current Points", "Final Score", "Final Points", "Final Grade" … before it
# reads assignments (GradebookImporter::NON_ASSIGNMENT_COLUMN_HEADERS), as it does with its own read-only
# totals; any other unknown column would be offered as a new assignment. "Final Points" is Canvas's name for
# a points total that counts what is missing as 0, which is what this total does.
MOODLE_TOTAL_COLUMNS = ["Course total (all notebooks)", "Course maximum (all notebooks)", "Course total note"]
CANVAS_TOTAL_COLUMN = "Notebooks Final Points"


@dataclass
class CourseTotal:
    """One person's nbgrader points over every graded assignment of the course (never scaled)."""

    person: str  # the course-wide key of the person (see :mod:`people`)
    score: float | None  # None: no total can be given yet, and ``note`` says why
    max_score: float
    note: str = ""  # what an instructor should know of this total, in plain words ("" when nothing)

    def cells(self) -> list[str]:
        return ["" if self.score is None else f"{self.score:.2f}", f"{self.max_score:.2f}", self.note]


@dataclass
class Grade:
    student: str  # the grader's key
    score: float
    max_score: float
    person: Student | None = None
    awaiting: tuple[str, ...] = ()  # answers graded by hand that have no (current) manual grade yet


def _scaled(score: float, max_score: float, target: float | None) -> float:
    return score if not target or not max_score else score * target / max_score


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ".")) if text.strip() else None
    except ValueError:
        return None


def moodle_worksheet(grades: list[Grade], table: tuple[str, list[str], list[dict[str, str]]] | None,
                     totals: dict[str, CourseTotal] | None = None) -> tuple[str, list[str]]:
    """The grading worksheet to upload, and what was left out. Given the worksheet Moodle let you download
    (``--roster``), its rows are written back as they were with the grade filled in, scaled to its
    "Maximum Grade"; otherwise one row per student with the assignment's own points as the maximum.
    ``totals`` ({student: their course total}) adds :data:`MOODLE_TOTAL_COLUMNS`, which the upload ignores."""
    extra = MOODLE_TOTAL_COLUMNS if totals is not None else []

    def with_total(row: dict[str, str], grade: Grade) -> dict[str, str]:
        total = (totals or {}).get(grade.student)
        return {**row, **dict(zip(extra, total.cells()))} if total else row

    skipped = [f"{g.student} (not a Moodle participant)" for g in grades if not g.student.startswith("moodle-")]
    by_id = {g.person.lms_id if g.person else g.student.removeprefix("moodle-"): g
             for g in grades if g.student.startswith("moodle-")}
    out = io.StringIO()
    if table and table[0] == "moodle":
        _, header, rows = table
        writer = csv.DictWriter(out, fieldnames=header + [c for c in extra if c not in header], lineterminator="\n")
        writer.writeheader()
        for row in rows:
            participant = _participant(row.get("Identifier", ""))
            grade = by_id.pop(participant, None) if participant else None
            if grade is not None:
                target = _number(row.get("Maximum Grade", ""))
                row = with_total({**row, "Grade": f"{_scaled(grade.score, grade.max_score, target):.2f}"}, grade)
            writer.writerow(row)
        from_worksheet = True
    else:
        writer = csv.DictWriter(out, fieldnames=MOODLE_COLUMNS + extra, lineterminator="\n")
        writer.writeheader()
        from_worksheet = False
    for lms_id, grade in sorted(by_id.items(), key=lambda item: int(item[0])):
        if from_worksheet:
            skipped.append(f"{grade.student} (not in the worksheet given with --roster)")
            continue
        person = grade.person
        writer.writerow(with_total({"Identifier": f"Participant {lms_id}", "Full name": person.name if person else "",
                                    "Email address": person.email if person else "", "Status": "",
                                    "Grade": f"{grade.score:.2f}", "Maximum Grade": f"{grade.max_score:.2f}",
                                    "Grade can be changed": "Yes", "Last modified (submission)": "-",
                                    "Last modified (grade)": "-"}, grade))
    return out.getvalue(), skipped


def _canvas_title(title: str) -> str:
    return re.sub(r"\s*\(\d+\)\s*$", "", title)


def canvas_gradebook(grades: dict[str, list[Grade]], people: dict[str, Student],
                     table: tuple[str, list[str], list[dict[str, str]]] | None,
                     totals: dict[str, CourseTotal] | None = None) -> tuple[str, list[str]]:
    """The gradebook CSV to import: the student columns, then one column per graded assignment. An
    assignment is written under the gradebook export's column whose title is its name (so Canvas matches
    it by id, and its points scale the grade); else under its own name, which Canvas offers to map.
    ``totals`` ({student: their course total}) adds :data:`CANVAS_TOTAL_COLUMN` (its maximum in the "Points
    Possible" row), which the import drops as it drops its own read-only totals."""
    header = table[1] if table and table[0] == "canvas" else []
    points_row = next((r for r in table[2] if "Points Possible" in r.get("Student", "")), {}) if header else {}
    columns, targets = {}, {}
    for assignment in grades:
        match = [h for h in header if _plain(_canvas_title(h)) == _plain(assignment)]
        columns[assignment] = match[0] if match else assignment
        targets[assignment] = _number(points_row.get(columns[assignment], "")) if match else None
    skipped, rows = [], {}
    for assignment, assignment_grades in grades.items():
        for grade in assignment_grades:
            person = people.get(grade.student) or grade.person
            if not grade.student.startswith("canvas-") or person is None:
                skipped.append(f"{grade.student} (not a Canvas student)")
                continue
            if not person.lms_id.isdigit():
                skipped.append(f"{grade.student} (anonymous: Canvas's import needs a user id; enter it in SpeedGrader)")
                continue
            row = rows.setdefault(person.lms_id, {"Student": person.name, "ID": person.lms_id,
                                                  "SIS User ID": person.sis_user_id, "SIS Login ID": person.sis_login_id,
                                                  "Section": person.section})
            row[columns[assignment]] = f"{_scaled(grade.score, grade.max_score, targets[assignment]):.2f}"
            if totals is not None and grade.student in totals:
                row[CANVAS_TOTAL_COLUMN] = totals[grade.student].cells()[0]
    out = io.StringIO()
    fieldnames = CANVAS_COLUMNS + list(columns.values()) + ([CANVAS_TOTAL_COLUMN] if totals is not None else [])
    writer = csv.DictWriter(out, fieldnames=fieldnames, lineterminator="\n")
    writer.writeheader()
    possible = {"Student": "Points Possible"}
    for assignment, column in columns.items():
        maxima = [g.max_score for g in grades[assignment]]
        possible[column] = f"{targets[assignment] or (max(maxima) if maxima else 0):.2f}"
    if totals:
        possible[CANVAS_TOTAL_COLUMN] = next(iter(totals.values())).cells()[1]
    writer.writerow(possible)
    for lms_id in sorted(rows, key=int):
        writer.writerow(rows[lms_id])
    return out.getvalue(), skipped


# -- feedback files each platform takes back ----------------------------------------------------------


def feedback_entry(person: Student, assignment: str) -> str | None:
    """Where a student's feedback page goes in the zip the platform's feedback upload takes; None when the
    platform has nowhere to put it (a Canvas student without an uploaded file to attach it to).

    Moodle ("Upload multiple feedback files in a zip") reads ``<name>_<participant id>_assignsubmission_file``
    from each path and skips a file identical to the submission's file of the same name. Canvas
    ("Re-Upload Submissions") reads ``…_<user id>_<attachment id>_…`` (or ``anon_<id>_<attachment id>_…``)
    from each file name and attaches the file as a comment to the submission that holds that attachment."""
    page = f"{assignment}-feedback.html"
    if person.lms == "moodle":
        name = (person.name or "Participant").replace("_", " ").replace("/", " ")
        prefix = person.submitted_as or f"{name}_{person.lms_id}"
        return f"{prefix}_assignsubmission_file/{page}"
    if person.lms == "canvas":
        if not person.attachment:
            return None
        prefix = person.submitted_as or f"{_plain(person.name) or 'student'}_{person.lms_id}"
        return f"{prefix}_{person.attachment}_{page}"
    return f"{person.lms_id or person.key}/{page}"

"""People: one person of the course, whichever assignment they handed in, and their course total.

nbgrader keys a student on the grader's id for them (:attr:`lms.Student.key`), and that id stays what it
is: the gradebook, formgrader, the feedback zips and the LMS uploads all use it. Canvas's user id and a
folder's name are the same in every assignment, so each is a person already. Moodle's participant id is one
per assignment (so is Canvas's anonymous id): the same student is ``moodle-500001`` in one assignment and
``moodle-731002`` in the next. This room joins those ids into one person by what the participant lists
(``--roster``) say of them: their e-mail address, and their username where Moodle's worksheet shows it.

How the join decides:

- An address or a username that two students of one assignment share tells nobody apart (a shared family
  address, a test account): it joins no one, and the notes name both.
- A student whom no roster gives an address or a username is kept per assignment, and the notes say so: give
  that assignment's grading worksheet with ``--roster``.
- Where addresses and usernames would chain two students of one assignment into one person, the chain is
  not trusted: each of them is kept per assignment, and the notes say so.
- A name is a label: one person named differently in two assignments is still one person, shown with the
  name of the first assignment (in the course's order) that names them; the notes list every name.

A course total (:func:`course_totals`) is a person's nbgrader points over every graded assignment (after a
late penalty, as nbgrader exports them), out of the sum of the assignments' points. An assignment the person
has no grade in counts 0, and the notes say where. The total is left blank, with the reason beside it, while
an answer of theirs graded by hand awaits its grade, and for a student kept per assignment in a course of
several assignments (a total of the one assignment the grader can see would be wrong).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from attention_course.grading import lms
from attention_course.grading.intake import people as read_people
from attention_course.grading.layout import Layout

PER_ASSIGNMENT = ("moodle-", "canvas-anon-")  # keys whose platform id is one per assignment (see lms.identify)
SHOWN = 10  # people named in one note before "and N more"
ROSTER_HINT = "give each assignment's grading worksheet with --roster and export again"


@dataclass
class Person:
    """One person of the course, and the nbgrader student id they have in each assignment."""

    key: str  # "email:<address>" or "username:<name>" when joined so; else the nbgrader student id itself
    name: str = ""
    students: dict[str, str] = field(default_factory=dict)  # {assignment: nbgrader student id}
    joined_by: str = ""  # "e-mail", "username", "course-wide id" (Canvas, folders); "" when kept per assignment
    apart_because: str = ""  # why a student is kept per assignment, in plain words

    @property
    def apart(self) -> bool:
        """Kept per assignment: an id of one assignment that nothing joins to the others."""
        return not self.joined_by

    def label(self) -> str:
        if self.apart:
            where = ", ".join(sorted(self.students))
            return f"{self.key} ({self.name + ', ' if self.name else ''}{where})"
        return f"{self.name} ({self.key})" if self.name else self.key


@dataclass
class People:
    persons: dict[str, Person]  # {person key: person}
    of: dict[str, str]  # {nbgrader student id: person key}
    notes: list[str]  # what the instructor should check: shared addresses, chains not trusted, names that differ


def person_keys(layout: Layout, assignments: list[str]) -> dict[str, str]:
    """{nbgrader student id: course person key} for everyone the intakes of ``assignments`` know."""
    return join({assignment: read_people(layout, assignment) for assignment in assignments}).of


def _per_assignment(student: str, identity: lms.Student | None) -> bool:
    if identity is None:
        return student.startswith(PER_ASSIGNMENT)
    return identity.lms == "moodle" or (identity.lms == "canvas" and identity.lms_id.startswith("anon_"))


def _marks(identity: lms.Student | None) -> set[tuple[str, str]]:
    """What a roster says that can tell a person apart across assignments: ("e-mail" | "username", value)."""
    if identity is None:
        return set()
    found = {("e-mail", identity.email.strip().casefold()), ("username", identity.username.strip().casefold())}
    return {(kind, value) for kind, value in found if value}


def _listed(items: list[str]) -> str:
    return ", ".join(items[:SHOWN]) + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def join(identities: dict[str, dict[str, lms.Student | None]]) -> People:
    """Everyone of ``identities`` ({assignment: {nbgrader student id: what the LMS and the roster said of them,
    or None}}, the assignments in the course's order), joined into people as the module's docstring says."""
    order = list(identities)
    seen: dict[str, dict[str, lms.Student | None]] = defaultdict(dict)  # {student: {assignment: identity}}
    for assignment, students in identities.items():
        for student, identity in students.items():
            seen[student][assignment] = identity
    per_assignment = sorted(s for s, by in seen.items() if any(_per_assignment(s, i) for i in by.values()))

    holders: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for student in per_assignment:
        for assignment, identity in seen[student].items():
            for mark in _marks(identity):
                holders[mark][assignment].add(student)
    notes, shared = [], set()
    for (kind, value), by in sorted(holders.items()):
        for assignment in order:
            if len(by.get(assignment, ())) > 1:
                shared.add((kind, value))
                notes.append(f"{assignment}: {' and '.join(sorted(by[assignment]))} share the {kind} {value}, which "
                             "therefore joins none of them to their other assignments")

    parent = {student: student for student in per_assignment}

    def root(student: str) -> str:
        while parent[student] != student:
            parent[student] = parent[parent[student]]
            student = parent[student]
        return student

    for mark, by in holders.items():
        if mark not in shared:
            members = sorted(set().union(*by.values()))
            for other in members[1:]:
                parent[root(other)] = root(members[0])
    groups: dict[str, list[str]] = defaultdict(list)
    for student in per_assignment:
        groups[root(student)].append(student)

    persons: dict[str, Person] = {}

    def add(key: str, students: list[str], joined_by: str, apart_because: str = "") -> None:
        person = Person(key, joined_by=joined_by, apart_because=apart_because)
        names: list[tuple[str, str]] = []
        for assignment in order:
            for student in students:
                if assignment in seen[student]:
                    person.students[assignment] = student
                    identity = seen[student][assignment]
                    if identity is not None and identity.name.strip():
                        names.append((assignment, " ".join(identity.name.split())))
        person.name = names[0][1] if names else ""
        if len({name.casefold() for _, name in names}) > 1 and not person.apart:
            notes.append(f"{key} is named differently in different assignments (" + ", ".join(
                f"{name!r} in {assignment}" for assignment, name in names) + f"): joined by {joined_by}, shown as "
                f"{person.name!r}; check that these are one person")
        persons[key] = person

    for student in sorted(set(seen) - set(per_assignment)):
        add(student, [student], "course-wide id")
    for members in groups.values():
        usable = sorted({mark for s in members for i in seen[s].values() for mark in _marks(i)} - shared)
        clash = [a for a in order if sum(a in seen[s] for s in members) > 1]
        if clash:
            notes.append(f"{' and '.join(members)} would be one person by their e-mail addresses and usernames, yet "
                         f"{clash[0]} has more than one of them: each is kept per assignment; check their rosters")
            for student in members:
                add(student, [student], "", "their rosters' e-mail addresses and usernames disagree")
        elif usable:
            kind, value = next((m for m in usable if m[0] == "e-mail"), usable[0])
            add(f"{'email' if kind == 'e-mail' else 'username'}:{value}", members, kind)
        else:
            had_marks = any(_marks(i) for s in members for i in seen[s].values())
            add(members[0], members, "", "their e-mail address or username is shared with another student"
                if had_marks else "no e-mail address or username on any roster")
    of = {student: key for key, person in persons.items() for student in person.students.values()}
    return People(persons, of, notes)


def course_totals(grades: dict[str, list[lms.Grade]], people: People) -> tuple[dict[str, lms.CourseTotal], list[str]]:
    """({nbgrader student id: their person's course total}, what the totals say, one line each) for the
    gradebook's ``grades`` ({assignment: every grade, those awaiting a manual grade too})."""
    max_score = sum(max((g.max_score for g in assignment_grades), default=0.0) for assignment_grades in grades.values())
    by_person: dict[str, dict[str, lms.Grade]] = defaultdict(dict)
    for assignment, assignment_grades in grades.items():
        for grade in assignment_grades:
            by_person[people.of[grade.student]][assignment] = grade
    several = len(grades) > 1
    unjoined = defaultdict(int)  # {assignment: its students kept per assignment}: a grade "missing" may be theirs
    for key in by_person:
        if people.persons[key].apart and several:
            for assignment in by_person[key]:
                unjoined[assignment] += 1

    def unless(assignment: str) -> str:
        count = unjoined[assignment]
        return f" (unless they are one of its {count} student(s) kept per assignment)" if count else ""

    totals: dict[str, lms.CourseTotal] = {}
    missing: dict[str, list[str]] = defaultdict(list)
    awaiting: list[str] = []
    apart: list[str] = []
    for key, got in sorted(by_person.items()):
        person = people.persons[key]
        waiting = [assignment for assignment, grade in got.items() if grade.awaiting]
        absent = [assignment for assignment in grades if assignment not in got]
        if waiting:
            total = lms.CourseTotal(key, None, max_score, "no total while written answers await a manual grade in "
                                    + ", ".join(waiting))
            awaiting.append(f"{person.label()} ({', '.join(waiting)})")
        elif person.apart and several:
            total = lms.CourseTotal(key, None, max_score, f"kept per assignment ({person.apart_because}): no total "
                                    f"across assignments; {ROSTER_HINT}")
            apart.append(person.label())
        else:
            note = "; ".join(f"no grade in {assignment}: counted 0{unless(assignment)}" for assignment in absent)
            total = lms.CourseTotal(key, sum(grade.score for grade in got.values()), max_score, note)
            for assignment in absent:
                missing[assignment].append(person.label())
        for grade in got.values():
            totals[grade.student] = total
    said = [f"kept per assignment, so no course total (no e-mail address or username on a roster joins their "
            f"assignments; {ROSTER_HINT}): {_listed(apart)}"] if apart else []
    said += [f"no grade in {assignment}, counted 0 in the course total{unless(assignment)}: {_listed(missing[assignment])}"
             for assignment in grades if assignment in missing]
    if awaiting:
        said.append(f"no course total while written answers await a manual grade in formgrader: {_listed(awaiting)}")
    return totals, said + people.notes

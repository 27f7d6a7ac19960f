#!/usr/bin/env bash
# Print a fully pinned requirements.txt from the virtual environment given as $1.
set -euo pipefail
cat <<'HEADER'
# Every package of the course's environment, pinned: the book build, the tests and the grader.
# Regenerate with `make lock` after changing pyproject.toml; environment.yml must list the same pins
# (tests/test_environment.py fails when the two drift apart).
# torch is the CPU build: an unpinned torch would pull a multi-GB CUDA build.
HEADER
"$1/bin/pip" freeze --exclude-editable | grep -v '^attention-course' | sed 's/^torch==\(.*\)+cpu$/torch==\1/' | sort -f

#!/usr/bin/env bash
# Print environment.yml for conda users: the pins of requirements.txt, pin for pin.
set -euo pipefail
cat <<'HEADER'
# Conda users: `conda env create -f environment.yml && conda activate attention-course`,
# then `pip install --no-deps -e .` and build both editions with `python scripts/build_book.py`.
# The pip list below is requirements.txt, pin for pin (tests/test_environment.py checks it).
# Debian/Ubuntu also need: fonts-wqy-microhei (figures), chromium, bubblewrap and postgresql (tests, grading).
name: attention-course
channels:
  - conda-forge
dependencies:
  - python=3.11
  - nodejs=20
  - pip
  - pip:
HEADER
grep -v '^#' "${1:-requirements.txt}" | grep . | sed 's/^/      - /'

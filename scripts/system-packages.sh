#!/usr/bin/env bash
# Make sure the Debian packages the course needs are present; install them when we may (root with apt-get).
#   book: a CJK font for the figures' Chinese labels
#   npm:  Node.js and npm, to fetch the scripts the book serves itself (web/package-lock.json)
#   test: Chromium for the browser tests, bubblewrap for the grading sandbox, a PostgreSQL server for the
#         shared-gradebook test (it starts a throwaway one from these binaries)
set -euo pipefail

declare -A check=(
  [fonts-wqy-microhei]='test -f /usr/share/fonts/truetype/wqy/wqy-microhei.ttc || test -n "${ATTENTION_COURSE_CJK_FONT:-}"'
  [npm]='command -v npm'
  [chromium]='command -v chromium'
  [bubblewrap]='command -v bwrap'
  [postgresql]='compgen -G "/usr/lib/postgresql/*/bin/pg_ctl"'
)
case "${1:?usage: system-packages.sh book|npm|test}" in
  book) wanted=(fonts-wqy-microhei) ;;
  npm) wanted=(npm) ;;
  test) wanted=(fonts-wqy-microhei chromium bubblewrap postgresql) ;;
  *) echo "unknown group: $1" >&2; exit 2 ;;
esac

missing=()
for package in "${wanted[@]}"; do
  eval "${check[$package]}" >/dev/null 2>&1 || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "Installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  exit 0
fi
echo "Missing system packages: ${missing[*]}" >&2
echo "Install them with:  sudo apt-get install ${missing[*]}" >&2
[[ " ${missing[*]} " == *" fonts-wqy-microhei "* ]] && \
  echo "(or set ATTENTION_COURSE_CJK_FONT to any font file that covers Chinese)" >&2
exit 1

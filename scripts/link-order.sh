#!/usr/bin/env bash
# Appends to an order file the functions of an executable that a command runs, for
# `scripts/release-build.sh --order` (Documentation/CLI.md, "Installing, and the release build").
#
# usage: scripts/link-order.sh ORDER_FILE EXECUTABLE -- COMMAND [ARG ...]
#
# COMMAND runs once under valgrind's callgrind (a few seconds to a minute: keep its work short and
# typical: the calls your program makes on every run). Each function of EXECUTABLE it ran is added
# to ORDER_FILE by its mangled symbol name, unless the file names it already, so several runs
# (a start-up, a request, a refresh) build one file. Linked with that order, the code a process
# runs sits together instead of being spread over the whole text, so it faults in fewer pages.
# Needs valgrind (Debian: valgrind).
set -euo pipefail
[[ $# -ge 4 && "$3" == "--" ]] || { sed -n '5p' "$0" | sed 's/^# //' >&2; exit 64; }
ORDER="$1"; EXE="$2"; shift 3
command -v valgrind >/dev/null || { echo "link-order.sh: valgrind is not installed" >&2; exit 69; }
base="$(basename "$EXE")"
profile="$(mktemp)"
trap 'rm -f "$profile"' EXIT
valgrind --tool=callgrind --demangle=no --compress-strings=no --compress-pos=no --callgrind-out-file="$profile" "$@" \
  >/dev/null 2>"$profile.log" || { tail -5 "$profile.log" >&2; rm -f "$profile.log"; echo "link-order.sh: the command failed" >&2; exit 1; }
rm -f "$profile.log"
touch "$ORDER"
before=$(wc -l < "$ORDER")
awk -v exe="/$base" '
  FILENAME == ARGV[1] { seen[$0] = 1; next }
  /^ob=/ { object = substr($0, 4); next }
  /^fn=/ {
    name = substr($0, 4)
    if (substr(object, length(object) - length(exe) + 1) == exe && name !~ /^0x/ && !(name in seen)) { seen[name] = 1; print name }
  }' "$ORDER" "$profile" >> "$ORDER"
echo "link-order.sh: $(( $(wc -l < "$ORDER") - before )) functions of $base added to $ORDER" >&2

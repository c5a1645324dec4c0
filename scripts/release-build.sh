#!/usr/bin/env bash
# The release build of authflow (and of your own executables): what Documentation/Performance.md
# measures. Documentation/CLI.md ("Installing, and the release build") describes each step.
#
# usage: scripts/release-build.sh [--install [PREFIX]] [--scratch-path DIR] [--order FILE] [PRODUCT ...]
#        (default PRODUCT: authflow)
#
# --install [PREFIX]  install each executable built into PREFIX/bin (default PREFIX: /usr/local),
#                     mode 0755; PREFIX must contain a '/' (/opt/authflow, ~/.local, ./dist). When
#                     PREFIX/bin is not writable, the copy (only the copy) runs under sudo. With
#                     authflow, also its man page (PREFIX/share/man/man1/authflow.1) and bash, zsh
#                     and fish completions (PREFIX/share/...), made by `authflow man|completion`.
#
# - `--static-swift-stdlib`: the Swift runtime, FoundationEssentials and Dispatch linked in (and so
#   `--disable-local-rpath`: no $ORIGIN run path);
# - libstdc++ linked statically when its archive is installed (g++ / libstdc++-12-dev): a linker
#   script named libstdc++.so that points at libstdc++.a is put first on the library path;
# - the toolchain's lld with packed relative relocations (DT_RELR) when glibc is 2.36 or later
#   (Debian 12's): ld.so then reads a 7 KB bitmap at start instead of a 900 KB table;
# - with --order FILE, lld places the functions FILE names first and together (one mangled symbol a
#   line, as scripts/link-order.sh writes them): the code a process runs then sits in a few pages
#   instead of being spread over the executable's 14 MB of text. Symbols it does not know are
#   ignored, so an order file made from an older build still applies.
#
# Prints the path of each executable built (with --install: each one installed). Every step that is
# not available is said and skipped.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="$REPO/.build"
ORDER=""
INSTALL=""
PRODUCTS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --scratch-path) SCRATCH="$2"; shift 2 ;;
    --order) ORDER="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    --install=*) INSTALL="${1#--install=}"; shift ;;
    --install)
      # The next argument is the prefix when it looks like a path; a product name never has a '/'.
      if [[ $# -gt 1 && "$2" == */* ]]; then INSTALL="$2"; shift 2; else INSTALL=/usr/local; shift; fi ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "release-build.sh: unknown option $1" >&2; exit 64 ;;
    *) PRODUCTS+=("$1"); shift ;;
  esac
done
[[ ${#PRODUCTS[@]} -gt 0 ]] || PRODUCTS=(authflow)
say() { printf 'release-build.sh: %s\n' "$*" >&2; }

# Before the build, which takes minutes: can PREFIX/bin be written (its nearest existing ancestor)?
SUDO=()
if [[ -n "$INSTALL" ]]; then
  [[ "$INSTALL" == */* ]] || { say "--install needs a PREFIX with a '/' (got '$INSTALL')"; exit 64; }
  existing="$INSTALL/bin"
  while [[ ! -e "$existing" ]]; do existing="$(dirname "$existing")"; done
  if [[ ! -d "$existing" ]]; then
    say "$existing is not a directory: cannot install into $INSTALL/bin"; exit 73
  elif [[ ! -w "$existing" ]]; then
    command -v sudo >/dev/null 2>&1 || { say "$existing is not writable and there is no sudo: pass a PREFIX you own (--install ~/.local)"; exit 73; }
    say "$existing is not writable: the copy into $INSTALL/bin will run under sudo"
    SUDO=(sudo)
  fi
fi

# --disable-local-rpath: no $ORIGIN run path. With the Swift runtime linked in, the executable loads
# no library of its own, so dlopen("libcurl.so.4") and the others search the system's directories
# only, never the directory the executable is in (and lintian has no run path to object to).
FLAGS=(-c release --static-swift-stdlib --disable-local-rpath --scratch-path "$SCRATCH")

archive="$(c++ -print-file-name=libstdc++.a 2>/dev/null || true)"
if [[ "$archive" == /* && -f "$archive" ]]; then
  mkdir -p "$SCRATCH/static-libstdc++"
  printf 'INPUT(%s)\n' "$archive" > "$SCRATCH/static-libstdc++/libstdc++.so"
  FLAGS+=(-Xswiftc "-L$SCRATCH/static-libstdc++")
else
  say "no libstdc++.a (install g++): libstdc++ stays a shared library"
fi

lld="$(dirname "$(command -v swift)")/ld.lld"
glibc="$(ldd --version 2>/dev/null | head -1 | grep -oE '[0-9]+\.[0-9]+$' || true)"
if [[ -x "$lld" && -n "$glibc" ]] && printf '2.36\n%s\n' "$glibc" | sort -V -C; then
  FLAGS+=(-Xswiftc -Xclang-linker -Xswiftc -fuse-ld=lld -Xlinker -z -Xlinker pack-relative-relocs)
  if [[ -n "$ORDER" ]]; then
    [[ -s "$ORDER" ]] || { say "no order file at $ORDER"; exit 66; }
    FLAGS+=(-Xlinker "--symbol-ordering-file=$ORDER" -Xlinker --no-warn-symbol-ordering)
  fi
else
  say "no ld.lld beside swift, or glibc older than 2.36: the default linker, relocations unpacked${ORDER:+, no function order}"
fi

for product in "${PRODUCTS[@]}"; do
  # Relink even when nothing was compiled: the order file may have changed.
  rm -f "$SCRATCH/release/$product"
  (cd "$REPO" && swift build "${FLAGS[@]}" --product "$product" 2>&1 | grep -E 'error|warning: |Build' | grep -v mktemp >&2) || true
  [[ -x "$SCRATCH/release/$product" ]] || { say "the build produced no $SCRATCH/release/$product"; exit 1; }
  if [[ -n "$INSTALL" ]]; then
    "${SUDO[@]}" install -d -m 0755 "$INSTALL/bin"
    "${SUDO[@]}" install -m 0755 "$SCRATCH/release/$product" "$INSTALL/bin/$product"
    echo "$INSTALL/bin/$product"
  else
    echo "$SCRATCH/release/$product"
  fi
done

# The manual page and the completion scripts, made by the installed authflow from its command table
# (Documentation/CLI.md, "completion and man").
if [[ -n "$INSTALL" && " ${PRODUCTS[*]} " == *" authflow "* ]]; then
  generated="$(mktemp -d)"
  trap 'rm -rf "$generated"' EXIT
  "$SCRATCH/release/authflow" man > "$generated/authflow.1"
  for shell in bash zsh fish; do "$SCRATCH/release/authflow" completion "$shell" > "$generated/$shell"; done
  while read -r source target; do
    "${SUDO[@]}" install -d -m 0755 "$(dirname "$INSTALL/$target")"
    "${SUDO[@]}" install -m 0644 "$generated/$source" "$INSTALL/$target"
    echo "$INSTALL/$target"
  done <<'FILES'
authflow.1 share/man/man1/authflow.1
bash share/bash-completion/completions/authflow
zsh share/zsh/site-functions/_authflow
fish share/fish/vendor_completions.d/authflow.fish
FILES
fi

#!/usr/bin/env bash
# Fails when the public API of the library modules breaks the last release's and CHANGELOG.md does
# not name the break (api/README.md; CHANGELOG.md's head says how a break is named).
#
# usage: scripts/api-check.sh                      compare the tree with the last release
#        scripts/api-check.sh --record [COMMIT]    record COMMIT (default HEAD) as the release of
#                                                  the version in VERSION: needs git history
#
# The last release is api/last-release (its version and commit); its API is api/baseline/*.json,
# one file per module of a library product, as `swift package diagnose-api-breaking-changes COMMIT
# --baseline-dir DIR` dumps it. The comparison is the one that command makes, by the same tool
# (swift-api-digester -diagnose-sdk, with the search paths SwiftPM passes it), run on the debug
# build of the tree, so it needs no git history: CI's checkout may have none. A break is named when
# its declaration (`AuthFlow.accessToken(for:)`, `FileSecretStore`) appears in backticks in
# CHANGELOG.md above the heading of the last release ("## 0.1.0 — …"), i.e. under "## Unreleased"
# or a newer version. A module of the release that is gone must be named the same way.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
command -v swift >/dev/null 2>&1 || export PATH="$PATH:/opt/swift/usr/bin"
say() { printf 'api-check.sh: %s\n' "$*" >&2; }
fail() { say "$*"; exit 1; }
digester="$(dirname "$(command -v swift)")/swift-api-digester"
[[ -x "$digester" ]] || fail "no swift-api-digester beside $(command -v swift)"
release() { sed -n "s/^$1 //p" api/last-release; }

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 0
fi
if [[ "${1:-}" == "--record" ]]; then
  version="$(tr -d '[:space:]' < VERSION)"
  commit="$(git rev-parse --verify "${2:-HEAD}^{commit}")" || fail "git cannot resolve ${2:-HEAD}: --record needs the repository's history"
  grep -qE "^## $version — [0-9]{4}-[0-9]{2}-[0-9]{2}$" CHANGELOG.md || fail "CHANGELOG.md has no heading '## $version — YYYY-MM-DD'"
  dumps="$(mktemp -d)"
  trap 'rm -rf "$dumps"' EXIT
  swift package diagnose-api-breaking-changes "$commit" --baseline-dir "$dumps" --regenerate-baseline >&2 || true
  ls "$dumps/$commit/"*.json >/dev/null 2>&1 || fail "swift package diagnose-api-breaking-changes wrote no baseline"
  rm -f api/baseline/*.json
  mkdir -p api/baseline
  for dump in "$dumps/$commit/"*.json; do
    # The dump keeps the tool's arguments (this machine's paths); the comparison does not read them.
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d["ABIRoot"].pop("tool_arguments", None)
json.dump(d, open(sys.argv[2], "w"), indent=2, sort_keys=False); open(sys.argv[2], "a").write("\n")' "$dump" "api/baseline/$(basename "$dump")"
  done
  sed -i -e "s/^version .*/version $version/" -e "s/^commit .*/commit $commit/" api/last-release
  say "recorded $version at $commit: api/last-release and api/baseline/ ($(ls api/baseline | tr '\n' ' '))"
  exit 0
fi
[[ $# -eq 0 ]] || fail "usage: scripts/api-check.sh [--record [COMMIT]]"

version="$(release version)"
commit="$(release commit)"
[[ -n "$version" && -n "$commit" ]] || fail "api/last-release names no version and commit"
heading="$(grep -nE "^## $version — " CHANGELOG.md | head -1 | cut -d: -f1)"
[[ -n "$heading" ]] || fail "CHANGELOG.md has no heading '## $version — …' for the last release"
# What CHANGELOG.md says since the release: from its first version heading down to the release's.
first="$(grep -nE '^## ' CHANGELOG.md | head -1 | cut -d: -f1)"
since="$(sed -n "${first},$((heading - 1))p" CHANGELOG.md)"

swift build >&2
bin="$(swift build --show-bin-path)"
search=(-I "$bin" -I "$bin/Modules")
for modulemap in Sources/*/module.modulemap; do search+=(-I "$(dirname "$modulemap")"); done

breaks=()
for baseline in api/baseline/*.json; do
  module="$(basename "$baseline" .json)"
  if [[ ! -e "$bin/Modules/$module.swiftmodule" ]]; then
    breaks+=("$module|module $module has been removed")
    continue
  fi
  if output="$("$digester" -diagnose-sdk -compiler-style-diags -baseline-path "$baseline" -module "$module" "${search[@]}" 2>&1)"; then :; fi
  while IFS= read -r line; do
    [[ "$line" == *"API breakage: "* ]] || continue
    line="${line#*API breakage: }"
    breaks+=("$module|${line% \[#api-digester-breaking-change\]}")
  done <<< "$output"
  if grep -E '(error|fatal error): ' <<< "$output" | grep -vq 'API breakage: '; then
    printf '%s\n' "$output" >&2
    fail "swift-api-digester could not compare $module with api/baseline/$module.json (above)"
  fi
done

unnamed=()
examples=()
for entry in "${breaks[@]}"; do
  module="${entry%%|*}"
  message="${entry#*|}"
  read -r kind name _ <<< "$message"
  names=("$name")
  # An accessor (AuthFlow.state.Get()) is also named by its property (AuthFlow.state).
  if [[ "$kind" == accessor ]]; then names+=("${name%.*}"); fi
  named=""
  for candidate in "${names[@]}"; do
    if grep -qF "\`$candidate\`" <<< "$since"; then named=yes; fi
  done
  if [[ -z "$named" ]]; then
    unnamed+=("  $module: $message")
    example="    - \`${names[-1]}\`: ${message#"$kind $name "}; …"
    [[ " ${examples[*]} " == *" $example "* || "$kind" == accessor && " ${examples[*]} " == *"\`${names[-1]}\`"* ]] || examples+=("$example")
  fi
done

if [[ ${#unnamed[@]} -gt 0 ]]; then
  {
    echo "api-check.sh: ${#unnamed[@]} API break(s) since $version (${commit:0:7}, api/last-release) that CHANGELOG.md does not name:"
    printf '%s\n' "${unnamed[@]}"
    echo "Name each in CHANGELOG.md under '## Unreleased', '### Breaking API changes' (above '## $version'),"
    echo "the declaration in backticks as written here (a property names its accessors), and what to"
    echo "use instead; for example:"
    echo "    ## Unreleased"
    echo ""
    echo "    ### Breaking API changes"
    echo ""
    printf '%s\n' "${examples[@]}"
    echo "Or keep the old declaration (deprecated) beside the new one, and there is no break to name."
  } >&2
  exit 1
fi
say "the API of $(ls api/baseline | sed 's/\.json$//' | tr '\n' ' ')against $version (${commit:0:7}): ${#breaks[@]} break(s), each named in CHANGELOG.md"

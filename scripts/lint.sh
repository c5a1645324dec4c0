#!/usr/bin/env bash
# Fails when Sources/OAuthFlow imports FoundationNetworking, when a public declaration lacks a doc
# comment, when the build (with tests) warns, when the library, the CLI or the benchmark uses
# swift-corelibs-foundation instead of FoundationEssentials, or when a doc comment's symbol link
# does not resolve.
set -euo pipefail
cd "$(dirname "$0")/.."

# The core library must not need FoundationNetworking (URLSession lives in OAuthFlowURLSession):
# any import of it in Sources/OAuthFlow, whatever its modifiers or #if around it, fails the lint.
networking=$(grep -rnE '^[[:space:]]*(@[A-Za-z_]+[[:space:]]+)*((public|package|internal|fileprivate|private)[[:space:]]+)?import[[:space:]]+((struct|class|enum|protocol|typealias|func|var|let)[[:space:]]+)?FoundationNetworking([.[:space:]]|$)' Sources/OAuthFlow || true)
if [ -n "$networking" ]; then
    echo "Sources/OAuthFlow must not import FoundationNetworking (put URLSession code in OAuthFlowURLSession):"
    echo "$networking"
    exit 1
fi

undocumented=$(swift format lint -r Sources/OAuthFlow Sources/OAuthFlowURLSession Sources/OAuthFlowTesting Sources/OAuthFlowPostgres 2>&1 | grep AllPublicDeclarationsHaveDocumentation || true)
if [ -n "$undocumented" ]; then
    echo "public declarations without documentation:"
    echo "$undocumented"
    exit 1
fi

log=$(mktemp)
swift build --build-tests 2>&1 | tee "$log" >/dev/null
if grep -E "(warning|error):" "$log" | grep -v "^warning: unable to find|plugin" >/dev/null; then
    echo "the build has warnings or errors:"
    grep -E "(warning|error):" "$log" | sort -u
    rm -f "$log"
    exit 1
fi
rm -f "$log"

# The library, the fleet store, the agent, the CLI and the benchmark build on FoundationEssentials alone: no
# object of theirs may reference swift-corelibs-foundation (module `Foundation`: Thread,
# CharacterSet, String(format:), Process, …), which would link all of Foundation, CoreFoundation
# and ICU into every executable (78 MB instead of 29 MB, twice the start-up relocations). Mangled
# Swift names spell the module as `10Foundation`; FoundationEssentials is `20FoundationEssentials`.
bin=$(swift build --show-bin-path)
corelibs=""
for target in OAuthFlow OAuthFlowPostgres AuthflowAgent AuthflowCLI authflow oauthflow_bench; do
    objects=("$bin/$target.build"/*.o)
    [ -e "${objects[0]}" ] || { echo "lint: no objects in $bin/$target.build"; exit 1; }
    found=$(nm -u "${objects[@]}" 2>/dev/null | sed 's/.* U //' | grep -E '(^\$s|[^0-9])10Foundation' | sort -u || true)
    if [ -n "$found" ]; then corelibs+="$target:"$'\n'"$(echo "$found" | swift demangle --simplified | sed 's/^/  /')"$'\n'; fi
done
if [ -n "$corelibs" ]; then
    echo "these targets use swift-corelibs-foundation (import FoundationEssentials and use what it has):"
    echo "$corelibs"
    exit 1
fi
# Every double-backtick symbol link in a doc comment resolves. The compiler does not read them, so
# a symbol that moves or changes its signature (a setting into Provider.Settings, a parameter
# added) leaves its links dangling. The toolchain's DocC resolves each module's links against the
# module's symbol graph, private symbols included since their comments link too. DocC reads one
# module at a time: a link to another module's type by its bare name (``OAuthError`` in the CLI)
# cannot resolve there and is left out.
docs=$(mktemp -d)
if ! swift package dump-symbol-graph --minimum-access-level private >"$docs/dump.log" 2>&1; then
    cat "$docs/dump.log"; rm -rf "$docs"; exit 1
fi
graphs=$(sed -n 's/^Files written to //p' "$docs/dump.log")
unresolved=""
for module in OAuthFlow OAuthFlowURLSession OAuthFlowTesting OAuthFlowPostgres AuthflowAgent AuthflowCLI; do
    mkdir "$docs/$module"
    cp "$graphs/$module".symbols.json "$docs/$module/"
    cp "$graphs/$module"@*.symbols.json "$docs/$module/" 2>/dev/null || true
    if ! docc convert --additional-symbol-graph-dir "$docs/$module" --fallback-display-name "$module" \
        --fallback-bundle-identifier "oauthflow.$module" --output-path "$docs/$module.doccarchive" --ide-console-output \
        >"$docs/$module.log" 2>&1; then
        cat "$docs/$module.log"; rm -rf "$docs"; exit 1
    fi
    unresolved+=$(python3 - "$graphs" "$module" "$docs/$module.log" <<'PY'
import glob, json, os, re, sys
graphs, module, log = sys.argv[1:]
others = set()   # the top-level symbols of the package's other modules
for path in glob.glob(os.path.join(graphs, "*.symbols.json")):
    name = os.path.basename(path)[: -len(".symbols.json")]
    if "@" in name or name == module:
        continue
    for symbol in json.load(open(path))["symbols"]:
        if len(symbol["pathComponents"]) == 1:
            others.add(symbol["pathComponents"][0])
pattern = re.compile(r"^(\S+:\d+:\d+): warning: '([^']+)' (doesn't exist at|is ambiguous at) '([^']+)'")
for line in open(log):
    match = pattern.match(line)
    if match and match.group(2).split("/")[0].split("(")[0] not in others:
        print(f"{match.group(1)}: ``{match.group(2)}`` {match.group(3)} {match.group(4)}")
PY
)
    unresolved+=$'\n'
done
rm -rf "$docs"
unresolved=$(echo "$unresolved" | sed '/^$/d' | sed "s|^$PWD/||")
if [ -n "$unresolved" ]; then
    echo "doc comments link to symbols that do not resolve (write the symbol's path as DocC knows it):"
    echo "$unresolved"
    exit 1
fi

echo "lint: every public declaration documented; every symbol link resolves; zero warnings; no swift-corelibs-foundation in the library, the CLI or the benchmark"

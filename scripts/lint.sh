#!/usr/bin/env bash
# Fails when Sources/OAuthFlow imports FoundationNetworking, when a public declaration lacks a doc
# comment, when the build (with tests) warns, or when the library, the CLI or the benchmark uses
# swift-corelibs-foundation instead of FoundationEssentials.
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
echo "lint: every public declaration documented; zero warnings; no swift-corelibs-foundation in the library, the CLI or the benchmark"

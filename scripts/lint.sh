#!/usr/bin/env bash
# Fails when Sources/OAuthFlow imports FoundationNetworking, when a public declaration lacks a doc
# comment, or when the build (with tests) warns.
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
echo "lint: every public declaration documented; zero warnings"

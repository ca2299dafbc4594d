#!/usr/bin/env bash
# Regenerates the conformance golden files: builds the Java program beside this script
# (kafka-streams 4.4.0 TopologyTestDriver) and runs every scenario, writing
# OUTDIR/<scenario>.txt (its output records) and OUTDIR/<scenario>.describe.txt (its
# topology.describe()). OUTDIR defaults to kstreamtest/testdata/conformance/ in the repo; the
# *.txt files already in it are deleted first, so that a renamed or removed scenario leaves
# no golden behind (other files, such as its README.md, stay).
#
#   testing/conformance/run.sh [OUTDIR]
#   testing/conformance/run.sh partitions [FILE]
#   testing/conformance/run.sh copartition [FILE]
#
# The second form writes instead FILE (default testdata/java_partitions.txt in the repo): the
# partitions that the Java producer chooses for 10k+ String and Long keys among 12 and 7
# partitions (conformance.Partitions), the golden file of query_partition_test.go. The third
# writes FILE (default testdata/java_copartition.txt): the co-partition groups, in Java's
# order, of ten join topologies and a cogroup over 1,650 sets of topic names
# (conformance.Copartition), the golden file of copartition_internal_test.go.
#
# Works from any directory; running it again rewrites the same files. Maven's output goes to
# testing/conformance/target/ (classes/ and lib/).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
mode=scenarios
if [[ "${1:-}" == partitions || "${1:-}" == copartition ]]; then
	mode=$1
	file="${2:-$root/testdata/java_$1.txt}"
	mkdir -p "$(dirname "$file")"
	file="$(cd "$(dirname "$file")" && pwd)/$(basename "$file")"
else
	out="${1:-$root/kstreamtest/testdata/conformance}"
	mkdir -p "$out"
	out="$(cd "$out" && pwd)"
fi

command -v mvn >/dev/null || { echo "run.sh: mvn not found" >&2; exit 1; }
command -v java >/dev/null || { echo "run.sh: java not found" >&2; exit 1; }

# Rebuild only when the pom or a source is newer than the last build.
stamp="$here/target/.built"
if [[ ! -f "$stamp" || -n "$(find "$here/pom.xml" "$here/src" -newer "$stamp" -print -quit)" ]]; then
	echo "run.sh: building with Maven" >&2
	log="$(mktemp)"
	# Maven's output is shown only if it fails (-q still prints colour resets).
	if ! mvn -q -B -Dstyle.color=never -f "$here/pom.xml" compile dependency:copy-dependencies >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		exit 1
	fi
	rm -f "$log"
	touch "$stamp"
fi

if [[ "$mode" == partitions ]]; then
	exec java -cp "$here/target/classes:$here/target/lib/*" conformance.Partitions "$file"
fi
if [[ "$mode" == copartition ]]; then
	exec java -cp "$here/target/classes:$here/target/lib/*" conformance.Copartition "$file"
fi

rm -f "$out"/*.txt
# A private temporary directory: TopologyTestDriver keeps its state under java.io.tmpdir
# (kafka-streams/<application.id>), which two runs at once would otherwise share.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
java -Djava.io.tmpdir="$tmp" -cp "$here/target/classes:$here/target/lib/*" conformance.Main "$out"

#!/usr/bin/env bash
# The Java side of the Schema Registry serde interop check: a Java program (Apache Avro
# 1.12.2, protobuf-java 4.36.2, Jackson; the Confluent framing written by hand, since
# Confluent's own serializers are not on Maven Central) that writes and reads the files of
# serde/testdata/interop/ (its README.md describes them).
#
#   testing/serdes/run.sh write [DIR]   Java writes the golden files, DIR/<format>/<case>.txt
#                                       (default: serde/testdata/interop in the repo); the
#                                       *.txt files already there are deleted first
#   testing/serdes/run.sh read DIR      Java checks the files that the Go serdes wrote there
#                                       (KSTREAM_SERDES_INTEROP_OUT=DIR go test ./serde/...):
#                                       each decodes to the expected value, and Java's own
#                                       encoding of that value is byte-identical (or differs
#                                       as documented); non-zero exit naming the case if not
#   testing/serdes/run.sh check         the whole round, as CI runs it: Java's goldens into a
#                                       temporary directory, the Go tests against them, the
#                                       checked-in goldens compared with them, then the Go
#                                       encodings written and read by Java
#
# Works from any directory. Maven's output goes to testing/serdes/target/ (classes/ and lib/)
# and is shown only if the build fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
goldens="$root/serde/testdata/interop"
pkgs=(./serde/avro ./serde/protobuf ./serde/jsonschema)

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -ge 1 ]] || usage
mode="$1"

command -v mvn >/dev/null || { echo "run.sh: mvn not found" >&2; exit 1; }
command -v java >/dev/null || { echo "run.sh: java not found" >&2; exit 1; }

# Rebuild only when the pom or a source is newer than the last build.
build() {
	local stamp="$here/target/.built"
	if [[ ! -f "$stamp" || -n "$(find "$here/pom.xml" "$here/src" -newer "$stamp" -print -quit)" ]]; then
		echo "run.sh: building with Maven" >&2
		local log
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
}

java_main() { java -cp "$here/target/classes:$here/target/lib/*" serdes.Main "$@"; }

abs() { mkdir -p "$1" && (cd "$1" && pwd); }

case "$mode" in
write)
	build
	java_main write "$(abs "${2:-$goldens}")"
	;;
read)
	[[ $# -eq 2 ]] || usage
	build
	java_main read "$(abs "$2")"
	;;
check)
	build
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	java_main write "$tmp/java"
	cd "$root"
	# -v for the test counts; the output is shown whole only on failure.
	if ! KSTREAM_SERDES_INTEROP_DIR="$tmp/java" go test -count=1 -v -run '^TestInteropWithJava$' "${pkgs[@]}" >"$tmp/go-read.log" 2>&1; then
		cat "$tmp/go-read.log"
		echo "run.sh: the Go serdes do not match Java's encodings (above)" >&2
		exit 1
	fi
	grep -hoE 'interop: .*' "$tmp/go-read.log" || true
	# The checked-in goldens must be what Java writes now.
	for f in "$tmp"/java/*/*.txt; do
		rel="${f#"$tmp/java/"}"
		cmp -s "$f" "$goldens/$rel" || { echo "checked-in golden serde/testdata/interop/$rel is stale (or missing): run testing/serdes/run.sh write" >&2; exit 1; }
	done
	for f in "$goldens"/*/*.txt; do
		rel="${f#"$goldens/"}"
		[[ -f "$tmp/java/$rel" ]] || { echo "checked-in golden serde/testdata/interop/$rel is no case of Java's: delete it" >&2; exit 1; }
	done
	if ! KSTREAM_SERDES_INTEROP_OUT="$tmp/go" go test -count=1 -v -run '^TestInteropWriteForJava$' "${pkgs[@]}" >"$tmp/go-write.log" 2>&1; then
		cat "$tmp/go-write.log"
		exit 1
	fi
	java_main read "$tmp/go"
	;;
*)
	usage
	;;
esac

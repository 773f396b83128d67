#!/bin/sh
# Builds target/icebox-java-proxy.jsa, the class-data-sharing archive named in runtime.json.
#
# A training run (cds/Train.java) starts the proxy with runtime.json's command, drives every
# request path once and records the classes it loads; `java -Xshare:dump` then archives the
# JDK's share of them. The proxy's own and Gson's classes are left out on purpose: the JVM only
# uses archived application classes when the jar sits at the path it had at dump time, and the
# jar is at runtimes/java/target on the host but at /opt/icebox/runtime/target in a sandbox.
#
# The archive is only valid for the JVM build that wrote it. A stale or missing archive is
# ignored silently by the JVM; the proxy then starts without any class-data sharing, correct
# but slower. So the archive is rebuilt whenever it is older than the jar, runtime.json, the
# training run, this script or the JVM's libjvm.so (a JDK package upgrade replaces that).
#
# Usage: runtimes/java/build-cds.sh [--force]
#        (after `mvn -B -q -f runtimes/java/pom.xml package`)
set -eu

cd "$(dirname "$0")"
java=${JAVA:-/usr/bin/java}
jar=target/icebox-java-proxy.jar
archive=target/icebox-java-proxy.jsa
trained=target/cds-trained.classlist
list=target/cds.classlist
log=target/cds-dump.log

if [ ! -f "$jar" ]; then
    echo "build-cds.sh: $jar is missing; run mvn -B -q package first" >&2
    exit 1
fi
libjvm=$(dirname "$(readlink -f "$java")")/../lib/server/libjvm.so
if [ "${1:-}" != "--force" ] && [ -f "$archive" ] && [ -z "$(find "$jar" runtime.json \
        cds/Train.java build-cds.sh "$libjvm" -newer "$archive" 2>/dev/null)" ]; then
    exit 0
fi
rm -f "$trained" "$list"

"$java" -cp "$jar" cds/Train.java . "$trained"

# Keep JDK classes only (see above); lambda-form lines are JDK-internal and stay.
grep -v -e '^icebox/' -e '^com/google/gson/' -e '^@lambda-proxy icebox/' \
    -e '^@lambda-proxy com/google/gson/' "$trained" > "$list"

# Dumped with the collector the proxy runs with; the dump itself is verbose, so it is logged.
# Written under another name and renamed: a JVM that maps a truncated archive can crash.
rm -f "$archive.tmp"
if ! "$java" -Xshare:dump -XX:+UseSerialGC -XX:SharedClassListFile="$list" \
        -XX:SharedArchiveFile="$archive.tmp" > "$log" 2>&1; then
    cat "$log" >&2
    rm -f "$archive.tmp"
    echo "build-cds.sh: creating $archive failed" >&2
    exit 1
fi
mv -f "$archive.tmp" "$archive"
echo "build-cds.sh: wrote runtimes/java/$archive"

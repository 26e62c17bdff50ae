#!/usr/bin/env bash
# Build the Curator client into $1 with javac (OpenJDK 17) against Debian's jars
# (libcurator-recipes-java and what it depends on: ZooKeeper, Guava, SLF4J): no Maven.
# Called by `python -m workloads.external.builds`.
set -euo pipefail
out=${1:?usage: build.sh OUT}
command -v javac >/dev/null || { echo "curator: javac is missing (apt-get install openjdk-17-jdk-headless)"; exit 1; }
jars=(curator-recipes curator-framework curator-client zookeeper zookeeper-jute guava
      failureaccess slf4j-api slf4j-simple netty-handler netty-transport netty-common
      netty-buffer netty-resolver netty-codec netty-transport-native-epoll
      netty-transport-native-unix-common)
cp=()
for jar in "${jars[@]}"; do
  f=/usr/share/java/$jar.jar
  if [ -f "$f" ]; then
    cp+=("$f")
  elif [[ $jar == curator-* || $jar == zookeeper ]]; then
    echo "curator: $f is missing (apt-get install libcurator-recipes-java)"; exit 1
  fi
done
classpath=$(IFS=:; echo "${cp[*]}")
mkdir -p "$out/classes"
javac --release 17 -d "$out/classes" -cp "$classpath" Protocol.java CuratorClient.java
# A launcher: a small, quick-starting JVM; SLF4J's simple logger on stderr, warnings only.
cat >"$out/client" <<LAUNCH
#!/bin/sh
exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k -XX:-UsePerfData -Xshare:auto \\
  -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dzookeeper.jmx.log4j.disable=true \\
  -cp "\$(dirname "\$0")/classes:$classpath" CuratorClient
LAUNCH
chmod +x "$out/client"
javac -version 2>&1

# lock-harness: what the ssh backend runs on a host. It is never installed there: each call is
#   ssh HOST [sudo -n] sh -s -- COMMAND ARGS...
# with this file on stdin, so a host needs only a POSIX shell, coreutils and procps (and the
# servers, iptables and libfaketime, which the backend installs with apt when missing).
#
# A host keeps everything of a run under $BASE/runs/<run>/ (BASE is HOSTS.toml's dir):
#   run.json            the marker: run id, control host, controller pid (harness clean reads it)
#   nodes/<name>/       a node's config files, data, faketime offset and server.pid
#   logs/<name>.log     a node's output (fetched back into the run directory at teardown)
# and $BASE/claim/run names the one run that has the host. iptables rules live in the chain
# LOCK-HARNESS (jumped to from INPUT and OUTPUT) with the comment lock-harness:<run>.
# A server.pid holds "PID STARTTIME" (field 22 of /proc/PID/stat): a pid is only signalled
# while the process that has it started at that time, so a recycled pid is never hit.
set -u
CHAIN=LOCK-HARNESS

starttime() {  # PID -> its start time; fails if it is gone or a zombie
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    set -- ${stat##*) }
    [ "$1" != Z ] || return 1
    shift 19
    echo "$1"
}

owned() {  # PIDFILE -> prints the pid if that process still runs
    [ -f "$1" ] || return 1
    read -r pid started < "$1" || return 1
    now=$(starttime "$pid") || return 1
    [ "$now" = "$started" ] || return 1
    echo "$pid"
}

wait_gone() {  # PIDFILE TENTHS
    n=0
    while owned "$1" >/dev/null; do
        [ "$n" -ge "$2" ] && return 1
        sleep 0.1
        n=$((n + 1))
    done
}

ipt() { iptables -w 5 "$@"; }

rules_of() {  # COMMENT -> our chain's rules with that comment, as -D arguments
    ipt -S "$CHAIN" 2>/dev/null | awk -v c="$1" '$1 == "-A" {
        for (i = 1; i < NF; i++) if ($i == "--comment") { v = $(i + 1); gsub(/"/, "", v)
            if (v == c) { sub(/^-A /, "-D "); print; break } } }'
}

foreign_rules() {  # LIVE-COMMENTS... -> rules with a lock-harness comment not in the list
    ipt -S "$CHAIN" 2>/dev/null | awk -v live=" $* " '$1 == "-A" {
        for (i = 1; i < NF; i++) if ($i == "--comment") { v = $(i + 1); gsub(/"/, "", v)
            if (v ~ /^lock-harness:/ && index(live, " " v " ") == 0) {
                sub(/^-A /, "-D "); print; break } } }'
}

delete_rules() {  # reads -D lines on stdin; prints how many went
    n=0
    while read -r rule; do
        eval "ipt $rule" && n=$((n + 1))
    done
    echo "$n"
}

drop_chain_if_empty() {
    ipt -S "$CHAIN" >/dev/null 2>&1 || return 0
    [ -z "$(ipt -S "$CHAIN" | grep '^-A')" ] || return 0
    for hook in INPUT OUTPUT; do
        while ipt -D "$hook" -j "$CHAIN" 2>/dev/null; do :; done
    done
    ipt -X "$CHAIN"
}

stop_all() {  # RUNDIR: every server of the run, SIGTERM (SIGKILL after 5 s)
    for f in "$1"/nodes/*/server.pid; do
        pid=$(owned "$f") || continue
        kill -s CONT "$pid" 2>/dev/null; kill -s TERM "$pid" 2>/dev/null
    done
    for f in "$1"/nodes/*/server.pid; do
        wait_gone "$f" 50 && continue
        pid=$(owned "$f") && kill -s KILL "$pid" 2>/dev/null
        wait_gone "$f" 50
    done
    return 0
}

# commands -------------------------------------------------------------------------------------
cmd_claim() {  # BASE RUN MARKER-JSON: take the host for a run, or say who has it
    mkdir -p "$1/runs" && chmod 700 "$1" || exit 1
    if mkdir "$1/claim" 2>/dev/null; then
        echo "$2" > "$1/claim/run"
        mkdir -p "$1/runs/$2/nodes" "$1/runs/$2/logs"
        printf '%s\n' "$3" > "$1/runs/$2/run.json"
        echo "claimed"
    else
        echo "busy $(cat "$1/claim/run" 2>/dev/null)"
    fi
}

cmd_runs() {  # BASE: one line per run on the host, "RUN MARKER-JSON"; and the claim
    for d in "$1"/runs/*/; do
        [ -d "$d" ] || continue
        run=$(basename "$d")
        echo "run $run $(cat "$d/run.json" 2>/dev/null | tr -d '\n')"
    done
    [ -f "$1/claim/run" ] && echo "claim $(cat "$1/claim/run")"
    return 0
}

cmd_missing() {  # NAME...: the commands (or absolute paths) that are not there
    for x in "$@"; do
        case $x in
            /*) [ -e "$x" ] || echo "$x" ;;
            *) command -v "$x" >/dev/null 2>&1 || echo "$x" ;;
        esac
    done
}

cmd_install() {  # PACKAGE...: apt-get install (apt-get update first if the lists are stale)
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "$@" 2>&1 && return 0
    apt-get update -q 2>&1 && apt-get install -y -q --no-install-recommends "$@" 2>&1
}

cmd_faketime() {  # the path of libfaketime's preload library, if installed
    for f in /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 \
             /usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1 \
             /usr/lib/faketime/libfaketime.so.1; do
        [ -e "$f" ] && { echo "$f"; return 0; }
    done
    return 0
}

cmd_iptables() {  # does iptables work here (root, NET_ADMIN)?
    ipt -S INPUT >/dev/null
}

cmd_put() {  # DIR NAME BASE64 [NAME BASE64 ...]: write files atomically
    dir=$1; shift
    mkdir -p "$dir" || exit 1
    while [ $# -ge 2 ]; do
        printf '%s' "$2" | base64 -d > "$dir/.$1.tmp" && mv "$dir/.$1.tmp" "$dir/$1" || exit 1
        shift 2
    done
}

cmd_start() {  # PIDFILE LOG ARGV...: the server in the foreground of its own session
    pidfile=$1 log=$2; shift 2
    rm -f "$pidfile"
    mkdir -p "$(dirname "$pidfile")" "$(dirname "$log")" || exit 1
    # The shell records its pid and start time, then becomes the server (exec keeps both).
    nohup setsid sh -c 'echo "$$ $(cut -d" " -f22 "/proc/$$/stat")" > "$0.tmp" &&
        mv "$0.tmp" "$0" && exec "$@"' "$pidfile" "$@" >> "$log" 2>&1 < /dev/null &
    launcher=$!
    n=0
    while [ ! -s "$pidfile" ]; do
        if ! starttime "$launcher" >/dev/null; then
            sleep 0.1
            [ -s "$pidfile" ] && break
            echo "it exited at once: $(tail -n 2 "$log" | tr '\n' ' ')" >&2
            exit 1
        fi
        [ "$n" -ge 200 ] && { echo "no pid after 10 s" >&2; exit 1; }
        sleep 0.05
        n=$((n + 1))
    done
    cat "$pidfile"
}

cmd_signal() {  # PIDFILE SIGNAL: "sent", or "gone" if the server is not running
    if pid=$(owned "$1"); then kill -s "$2" "$pid" && echo sent; else echo gone; fi
}

cmd_running() {  # PIDFILE
    if owned "$1" >/dev/null; then echo yes; else echo no; fi
}

cmd_stop() {  # PIDFILE TENTHS: SIGTERM, SIGKILL after TENTHS/10 s
    pid=$(owned "$1") || { echo gone; return 0; }
    kill -s CONT "$pid" 2>/dev/null; kill -s TERM "$pid" 2>/dev/null
    wait_gone "$1" "$2" && { echo stopped; return 0; }
    pid=$(owned "$1") && kill -s KILL "$pid" 2>/dev/null
    wait_gone "$1" 50 && echo killed
}

cmd_kill() {  # PIDFILE: SIGKILL and wait until it is gone
    pid=$(owned "$1") || { echo gone; return 0; }
    kill -s KILL "$pid" 2>/dev/null
    wait_gone "$1" 50 && echo killed
}

cmd_clock() {  # FILE OFFSET: libfaketime's offset, read by the server on every clock call
    printf '%s\n' "$2" > "$1.tmp" && mv "$1.tmp" "$1"
}

cmd_cut() {  # COMMENT ADDRESS...: drop everything to and from each address
    c=$1; shift
    ipt -S "$CHAIN" >/dev/null 2>&1 || ipt -N "$CHAIN" || exit 1
    for hook in INPUT OUTPUT; do
        ipt -C "$hook" -j "$CHAIN" 2>/dev/null || ipt -I "$hook" 1 -j "$CHAIN" || exit 1
    done
    for a in "$@"; do
        ipt -A "$CHAIN" -s "$a" -m comment --comment "$c" -j DROP &&
            ipt -A "$CHAIN" -d "$a" -m comment --comment "$c" -j DROP || exit 1
    done
}

cmd_heal() {  # COMMENT: remove the run's rules
    rules_of "$1" | delete_rules
}

cmd_stop_all() {  # RUNDIR
    [ -d "$1" ] && stop_all "$1"
    return 0
}

cmd_cat() {  # FILE
    cat "$1" 2>/dev/null
    return 0
}

cmd_teardown() {  # BASE RUN COMMENT: stop the run's servers, remove its rules and files
    dir="$1/runs/$2"
    [ -d "$dir" ] && stop_all "$dir"
    if command -v iptables >/dev/null 2>&1; then
        rules_of "$3" | delete_rules >/dev/null
        drop_chain_if_empty
    fi
    rm -rf "$dir"
    [ "$(cat "$1/claim/run" 2>/dev/null)" = "$2" ] && rm -rf "$1/claim"
    rmdir "$1/runs" 2>/dev/null; rmdir "$1" 2>/dev/null
    return 0
}

cmd_orphans() {  # BASE LIVE-COMMENT...: rules of runs that are gone; a claim with no run
    base=$1; shift
    if command -v iptables >/dev/null 2>&1; then
        foreign_rules "$@" | delete_rules
        drop_chain_if_empty
    else
        echo 0
    fi
    claim=$(cat "$base/claim/run" 2>/dev/null)
    if [ -d "$base/claim" ] && { [ -z "$claim" ] || [ ! -d "$base/runs/$claim" ]; }; then
        rm -rf "$base/claim"
    fi
    rmdir "$base/runs" 2>/dev/null; rmdir "$base" 2>/dev/null
    return 0
}

cmd=$1
shift
case $cmd in
    claim|runs|missing|install|faketime|iptables|put|start|signal|running|stop|kill|clock|\
    cut|heal|stop_all|cat|teardown|orphans) "cmd_$cmd" "$@" ;;
    *) echo "unknown command $cmd" >&2; exit 2 ;;
esac

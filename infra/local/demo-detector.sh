#!/bin/sh
# A stand-in for a site team's detection script, used by `cargo xtask demo`: it reads the
# job (JSON) on stdin, "looks" at the cameras for a moment, and prints one JSON result.
#   demo-detector.sh queue     people waiting in line (violation when more than 6)
#   demo-detector.sh shelf     empty shelf facings (violation when more than 3)
#   demo-detector.sh broken    a camera that cannot be reached: exits 3
set -eu
mode=${1:-queue}
job=$(cat)
random() { od -An -N2 -tu2 /dev/urandom | tr -d ' '; }
cameras=$(printf '%s' "$job" | sed -n 's/.*"camera_ids":\[\([^]]*\)\].*/\1/p')
sleep "0.$(( $(random) % 9 + 1 ))"
case "$mode" in
    queue)
        people=$(( $(random) % 11 ))
        violations=$(( people > 6 ? 1 : 0 ))
        echo "counted $people people at [${cameras}]" >&2
        printf '{"feature_result": "detection_complete", "is_success": true, "people": %d, "violations": %d, "camera_ids": [%s]}\n' \
            "$people" "$violations" "$cameras"
        ;;
    shelf)
        empty=$(( $(random) % 6 ))
        violations=$(( empty > 3 ? 1 : 0 ))
        printf '{"feature_result": "detection_complete", "is_success": true, "empty_facings": %d, "violations": %d}\n' \
            "$empty" "$violations"
        ;;
    broken)
        echo "camera rtsp://10.0.0.99:554/stream: connection refused" >&2
        exit 3
        ;;
    *)
        echo "unknown mode '$mode'" >&2
        exit 2
        ;;
esac

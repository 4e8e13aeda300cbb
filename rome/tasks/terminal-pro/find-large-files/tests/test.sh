#!/bin/bash
# Bash-only verifier (the image has no Python): recompute the listing and compare.
mkdir -p /logs/verifier
expected=$(find /srv/data -type f -printf '%s %p\n' | awk '$1 > 102400' | LC_ALL=C sort -k1,1nr -k2,2)
if [ -f /root/large_files.txt ] && [ -n "$expected" ] \
    && diff <(echo "$expected") <(sed '/^$/d' /root/large_files.txt) >/logs/verifier/diff.txt; then
    echo "large files ok"
    echo 1 > /logs/verifier/reward.txt
else
    echo "listing differs:"; head -20 /logs/verifier/diff.txt 2>/dev/null
    echo 0 > /logs/verifier/reward.txt
fi

#!/bin/bash
# Bash-only verifier (the image has no Python). First the inputs: regenerate the tree elsewhere and check that
# /srv/data still holds the same files and links, then recompute the listing and compare.
mkdir -p /logs/verifier
listing() { (cd "$1" && find . \( -type f -printf '%p %s\n' \) -o \( -type l -printf '%p link\n' \) | LC_ALL=C sort); }
sed 's#/srv/data#/tmp/regen/data#g' /tests/gen_truth.sh > /tmp/regen.sh && bash /tmp/regen.sh
if ! diff <(listing /tmp/regen/data) <(listing /srv/data) >/logs/verifier/inputs.diff; then
    echo "/srv/data was changed; the task's inputs must stay as they are"; head -5 /logs/verifier/inputs.diff
    echo 0 > /logs/verifier/reward.txt
    exit 0
fi
expected=$(find /srv/data -type f -printf '%s %p\n' | awk '$1 > 102400' | LC_ALL=C sort -k1,1nr -k2,2)
if [ -f /root/large_files.txt ] && [ -n "$expected" ] \
    && diff <(echo "$expected") <(sed '/^$/d' /root/large_files.txt) >/logs/verifier/diff.txt; then
    echo "large files ok"
    echo 1 > /logs/verifier/reward.txt
else
    echo "listing differs:"; head -20 /logs/verifier/diff.txt 2>/dev/null
    echo 0 > /logs/verifier/reward.txt
fi

#!/bin/bash
# Deterministic tree: bash's RANDOM repeats its sequence for a given seed.
set -e
RANDOM=8113
for i in $(seq 1 140); do
    dir=/srv/data/$(( RANDOM % 6 ))/sub$(( RANDOM % 4 ))
    mkdir -p "$dir"
    size=$(( (RANDOM % 260) * 1024 + RANDOM % 1024 ))
    head -c "$size" /dev/zero > "$dir/file_$i.bin"
done
ln -s /srv/data/0 /srv/data/link-to-0
head -c 102400 /dev/zero > /srv/data/exactly_100k.bin
head -c 900000 /dev/zero > /srv/data/.hidden_big.bin

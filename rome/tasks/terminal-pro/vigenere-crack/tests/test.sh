#!/bin/bash
# Runs the task's checks and writes the reward Harbor-style: 1 when every check passes, else 0.
mkdir -p /logs/verifier
if python3 /tests/inputs_intact.py && python3 /tests/check.py; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi

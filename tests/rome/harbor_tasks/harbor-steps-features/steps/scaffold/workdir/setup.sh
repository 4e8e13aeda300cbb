# Runs in the workdir before the step's agent, then is removed.
mkdir -p /app/out
echo staged > /app/out/keep.txt
echo scratch > /app/out/skip.tmp
touch /app/.staged

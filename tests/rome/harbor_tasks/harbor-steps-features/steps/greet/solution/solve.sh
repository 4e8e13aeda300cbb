# Anything of the previous step's verifier or oracle still here is a leak the tests must catch.
if [ -e /tests ] || [ -e /logs/verifier ] || [ -e /solution/scaffold-notes.txt ]; then
  echo leaked > /app/leak
fi
./greet.sh > final.txt

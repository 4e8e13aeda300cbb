source /tests/helpers.sh
mkdir -p /logs/artifacts && echo "greet verified" > /logs/artifacts/greet.log
[ ! -e /app/leak ] || fail "the previous step's tests, reward or solution were visible to this step's agent"
[ "${GREETING_WORD:-}" = "Hello" ] || fail "a step without env inherits the task's [verifier.env]"
[ -z "${EXPECTED_NAME:-}" ] || fail "the previous step's env leaked into this step"
[ "$(cat /app/final.txt)" = "Hello, Ada!" ] || fail "final.txt holds $(cat /app/final.txt)"
pass

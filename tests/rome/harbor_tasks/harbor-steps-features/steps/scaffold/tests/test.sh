source /tests/helpers.sh
mkdir -p /logs/artifacts && echo "scaffold verified" > /logs/artifacts/scaffold.log
[ "${EXPECTED_NAME:-}" = "Ada" ] || fail "EXPECTED_NAME from [steps.verifier.env] is missing"
[ -z "${GREETING_WORD:-}" ] || fail "a non-empty step env replaces the task's; GREETING_WORD leaked in"
[ "$(cat /tmp/step-probes)" = 3 ] || fail "the healthcheck ran $(cat /tmp/step-probes) times, not 3"
[ -f /app/.staged ] && [ ! -e /app/setup.sh ] || fail "workdir/setup.sh did not run or was left behind"
[ "$(/app/greet.sh)" = "Hello, $EXPECTED_NAME!" ] || fail "greet.sh printed $(/app/greet.sh)"
pass

fail() { echo "FAILED: $*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(cat /tmp/env-probes)" = 3 ] || fail "the environment healthcheck ran $(cat /tmp/env-probes) times, not 3"
[ "$(cat /srv/agent-cwd)" = /srv/work ] || fail "agent commands ran in $(cat /srv/agent-cwd), not the workdir"
[ "$(cat /srv/work/answer.txt)" = "$EXPECTED_ANSWER" ] || fail "answer.txt is not $EXPECTED_ANSWER"
echo 1 > /logs/verifier/reward.txt

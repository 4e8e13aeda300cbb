fail() { echo "FAILED: $*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(cat /tmp/env-probes)" = 3 ] || fail "the environment healthcheck ran $(cat /tmp/env-probes) times, not 3"
[ "$(cat /srv/agent-cwd)" = /srv/work ] || fail "agent commands ran in $(cat /srv/agent-cwd), not the workdir"
[ "$(cat /srv/work/answer.txt)" = "$EXPECTED_ANSWER" ] || fail "answer.txt is not $EXPECTED_ANSWER"
probe() { (exec 3<>/dev/tcp/127.0.0.1/3141 && printf 'GET /root/pypi/+simple/six/ HTTP/1.0\r\n\r\n' >&3 && head -c 5 <&3) 2>/dev/null; }
[ "$(cat /srv/agent-net)" = blocked ] || fail "the agent phase reached the package cache"
# A packages sandbox (PIP_INDEX_URL set) gives the cache back to the verifier phase.
if [ -n "${PIP_INDEX_URL:-}" ]; then [ "$(probe)" = "HTTP/" ] || fail "the verifier phase has no cache"; fi
echo 1 > /logs/verifier/reward.txt

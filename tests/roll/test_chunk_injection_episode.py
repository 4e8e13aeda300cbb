"""A training episode whose agent injects model calls (issue 26 item 4): the real terminal episode with iflow
inside the sandbox, the train-mode proxy behind its forwarder and a scripted model whose shell command finds
the agent's model URL and calls the chat route itself. The injected call must not become a chunk, and the
episode's record counts it (the step metrics sum it: tests/roll/test_refused_calls_metric.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.roll import test_terminal_episode as episodes

# The episode module's fixtures, under the names its fixtures ask each other for.
scripted, proxy, fleet_url, task = episodes.scripted, episodes.proxy, episodes.fleet_url, episodes.task

INJECT = """cat > /tmp/inject.py <<'EOF'
import glob, json, re, urllib.error, urllib.request
urls = set()
for path in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        text = open(path, "rb").read().replace(b"\\0", b" ").decode(errors="replace")
    except OSError:
        continue
    urls.update(re.findall(r"--base-url (http://127[.]0[.]0[.]1:[0-9]+/v1)", text))
body = {"model": "policy", "messages": [{"role": "user", "content": "Say that the tests passed."}]}
for url in urls:
    request = urllib.request.Request(
        url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        print("INJECTED", urllib.request.urlopen(request, timeout=60).status)
    except urllib.error.HTTPError as error:
        print("REFUSED", error.code)
EOF
python3 /tmp/inject.py"""


@pytest.mark.docker
@pytest.mark.slow
def test_an_injected_model_call_is_no_chunk_and_is_counted(
    scripted: Any, proxy: Any, fleet_url: str, task: Any
) -> None:
    engine = scripted[0]
    engine.push(episodes.shell_call(INJECT), "Done.")
    episode = episodes.run_agent_episode(task, proxy, fleet_url, agent_timeout_s=120, in_sandbox=True)

    record = episode.record
    assert record.refused_calls == 1 and record.refusals == {"not_continued": 1}, episode.trial.agent_log[
        -2000:
    ]
    assert len(record.chunks) == 2  # the agent's own two calls
    assert "REFUSED 409" in str(record.chunks[1].messages), record.chunks[1].messages[-1]

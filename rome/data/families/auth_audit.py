"""security-audit: find brute-force sources and likely compromised accounts in an sshd auth log."""

from __future__ import annotations

import random

from pydantic import Field

from rome.data.families.base import Family, FileSpec, Instance, Knobs, Mistake, Step
from rome.data.families.words import USERS, ip

CHECK = """
got = read("/app/answer.txt").split("\\n")
got = [line.strip() for line in got if line.strip()]
if got != EXPECTED["answer"]:
    fail(f"/app/answer.txt should hold {len(EXPECTED['answer'])} line(s); got {got[:6]}")
"""


class AuthKnobs(Knobs):
    sources: int | None = Field(None, ge=2, le=40, description="distinct client IPs in the log")
    threshold: int | None = Field(None, ge=2, le=20, description="failures that make an IP suspicious")


class AuthAudit(Family):
    name = "auth-audit"
    domain = "security-audit"
    summary = "top failing IP, IPs over a failure threshold, brute force followed by a login"
    knobs = AuthKnobs

    def resolve(self, knobs: Knobs, rng: random.Random) -> Knobs:
        knobs = super().resolve(knobs, rng)
        assert isinstance(knobs, AuthKnobs)
        return knobs.model_copy(
            update={
                "sources": knobs.sources or rng.randint(3, 4 * (knobs.level or 1) + 3),
                "threshold": knobs.threshold or rng.randint(3, 8),
            }
        )

    def build(self, rng: random.Random, knobs: AuthKnobs) -> Instance:  # type: ignore[override]
        assert knobs.sources is not None and knobs.threshold is not None
        level, threshold = knobs.level or 1, knobs.threshold
        ips: list[str] = []
        while len(ips) < knobs.sources:
            candidate = ip(rng)
            if candidate not in ips:
                ips.append(candidate)
        failures = {address: rng.randint(0, threshold - 1) for address in ips}
        # Distinct counts for the top IP (level 1), some sources over the threshold (levels 2-3).
        top = ips[0]
        failures[top] = threshold + len(ips) + 2
        for address in rng.sample(ips[1:], max(1, len(ips) // 3)):
            failures[address] = rng.randint(threshold, threshold + len(ips))
        events: list[tuple[str, str, str]] = []  # (kind, user, ip)
        for address, count in failures.items():
            events += [("Failed", rng.choice(USERS), address) for _ in range(count)]
            events += [("Accepted", rng.choice(USERS), address) for _ in range(rng.randint(0, 1))]
        rng.shuffle(events)
        compromised: set[tuple[str, str]] = set()
        if level == 3:
            suspicious = [a for a, c in failures.items() if c >= threshold]
            for address in rng.sample(suspicious, max(1, len(suspicious) // 2)):
                user = rng.choice(USERS)
                events.append(("Accepted", user, address))
            seen_fail: dict[str, int] = {}
            for kind, user, address in events:
                if kind == "Failed":
                    seen_fail[address] = seen_fail.get(address, 0) + 1
                elif seen_fail.get(address, 0) >= threshold:
                    compromised.add((address, user))
        lines = []
        for index, (kind, user, address) in enumerate(events):
            clock = f"{(index // 60) % 24:02d}:{index % 60:02d}:{rng.randint(0, 59):02d}"
            stamp = f"Mar {1 + index // 400:2d} {clock}"
            pid = rng.randint(1000, 65000)
            lines.append(
                f"{stamp} {rng.choice(('gw', 'bastion'))} sshd[{pid}]: "
                f"{kind} password for {user} from {address} "
                f"port {rng.randint(1024, 65535)} ssh2"
            )
            if rng.random() < 0.1:
                lines.append(f"{stamp} gw CRON[{pid}]: pam_unix(cron:session): session opened for user root")
        log = "\n".join(lines) + "\n"
        files = {"/app/auth.log": FileSpec(log)}
        count_fails = (
            "grep 'Failed password' /app/auth.log | awk '{print $(NF-3)}' | sort | uniq -c | sort -rn"
        )
        common = {
            "family": self.name,
            "seed": 0,
            "knobs": {},
            "files": files,
            "check": CHECK,
            "domain": self.domain,
        }
        if level == 1:
            return Instance(
                **common,
                instruction="`/app/auth.log` is an sshd log. Which client IP address has the most `Failed "
                "password` lines? Write just that address to `/app/answer.txt`.",
                steps=[
                    Step(
                        f"{count_fails} | head -1 | awk '{{print $2}}' > /app/answer.txt",
                        "count failures per IP and keep the top one",
                    )
                ],
                expected={"answer": [top], "intact": ["/app/auth.log"]},
                tags=["grep", "uniq", "ssh"],
                mistakes=[Mistake(0, "grep 'Failed password' /var/log/auth.log | head", "look at failures")],
            )
        over = sorted(a for a, c in failures.items() if c >= threshold)
        if level == 2:
            return Instance(
                **common,
                instruction=f"`/app/auth.log` is an sshd log. List every client IP address with at least "
                f"{threshold} `Failed password` lines, sorted as text, one per line, in `/app/answer.txt`.",
                steps=[
                    Step("head -5 /app/auth.log", "look at the format"),
                    Step(
                        f"{count_fails} | awk '$1 >= {threshold} {{print $2}}' | sort > /app/answer.txt",
                        "IPs over the threshold",
                    ),
                ],
                expected={"answer": over, "intact": ["/app/auth.log"]},
                tags=["grep", "awk", "ssh"],
                mistakes=[Mistake(1, f"awk '$1 >= {threshold}' /app/auth.log.1", "filter by count")],
            )
        answer = sorted(f"{address} {user}" for address, user in compromised)
        script = (
            "python3 - <<'PY'\nimport re\nfails, hits = {}, set()\n"
            "for line in open('/app/auth.log'):\n"
            "    m = re.search(r'(Failed|Accepted) password for (\\S+) from (\\S+)', line)\n"
            "    if not m:\n        continue\n    kind, user, ip = m.groups()\n"
            "    if kind == 'Failed':\n        fails[ip] = fails.get(ip, 0) + 1\n"
            f"    elif fails.get(ip, 0) >= {threshold}:\n        hits.add(f'{{ip}} {{user}}')\n"
            "open('/app/answer.txt', 'w').write(''.join(h + '\\n' for h in sorted(hits)))\nPY"
        )
        return Instance(
            **common,
            instruction=f"`/app/auth.log` is an sshd log, in time order. An IP is brute-forcing once it has "
            f"{threshold} or more `Failed password` lines so far; "
            "a later `Accepted password` line from that IP "
            "means the account was probably compromised. Write "
            "each such `IP USER` pair once, sorted as text, "
            f"one per line, to `/app/answer.txt` (empty file if none).",
            steps=[
                Step("head -5 /app/auth.log", "look at the format"),
                Step(f"{count_fails} | head", "see the noisiest sources"),
                Step(script, "find logins after brute force"),
                Step("cat /app/answer.txt", "check"),
            ],
            expected={"answer": answer, "intact": ["/app/auth.log"]},
            tags=["python", "ssh", "incident-response"],
            mistakes=[Mistake(2, 'python3 -c "import pandas"', "try pandas for the log")],
        )

"""security-audit: find brute-force sources and likely compromised accounts in an sshd auth log.

The seed draws where the log is, the question (level 1: the top failing IP or user, one user's or one IP's
failures, the users who logged in, how many sources failed; level 2: sources or users over a failure
threshold, as a list, with counts, or how many; level 3: logins after brute force, in one of several
formats), the threshold and the answer file.
"""

from __future__ import annotations

import random

from pydantic import Field

from rome.data.families.base import Family, FileSpec, Instance, Knobs, Mistake, Step
from rome.data.families.words import OUTPUT_NAMES, USERS, ip

LOG_DIRS = ("logs", "var/log", "incident", "evidence", "audit", "ssh", "forensics", "collected")
LOG_NAMES = ("auth.log", "secure", "sshd.log", "auth.log.1", "ssh-auth.log")
# Level 3 answer lines: how a compromised (IP, user) pair is written.
PAIR_FORMATS = ("{ip} {user}", "{user} {ip}", "{user}@{ip}", "{ip},{user}")

CHECK = """
got = read(EXPECTED["output"]).split("\\n")
got = [line.strip() for line in got if line.strip()]
if got != EXPECTED["answer"]:
    fail(f"{EXPECTED['output']} should hold {len(EXPECTED['answer'])} line(s); got {got[:6]}")
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
                "threshold": knobs.threshold or rng.randint(3, 12),
            }
        )

    def build(self, rng: random.Random, knobs: AuthKnobs) -> Instance:  # type: ignore[override]
        assert knobs.sources is not None and knobs.threshold is not None
        level, threshold = knobs.level or 1, knobs.threshold
        log = f"/app/{rng.choice(LOG_DIRS)}/{rng.choice(LOG_NAMES)}"
        out = f"/app/{rng.choice(OUTPUT_NAMES)}"
        events = _events(rng, knobs.sources, threshold, level)
        if level == 1:
            question = _level_one(rng, events, log, out)
        elif level == 2:
            question = _level_two(rng, events, threshold, log, out)
        else:
            question = _level_three(rng, events, threshold, log, out)
        instruction, steps, answer, tags, mistake = question
        return Instance(
            family=self.name,
            seed=0,
            knobs={},
            instruction=instruction,
            files={log: FileSpec(_render(rng, events))},
            steps=steps,
            check=CHECK,
            expected={"answer": answer, "output": out, "intact": [log]},
            domain=self.domain,
            tags=tags,
            mistakes=[mistake],
        )


Event = tuple[str, str, str]  # (Failed | Accepted, user, ip)
Question = tuple[str, list[Step], list[str], list[str], Mistake]


def _events(rng: random.Random, sources: int, threshold: int, level: int) -> list[Event]:
    """Failures per source: one clear top source, about a third over the threshold, the rest under it;
    at level 3, logins from some brute-forcing sources after their failures."""
    ips: list[str] = []
    while len(ips) < sources:
        candidate = ip(rng)
        if candidate not in ips:
            ips.append(candidate)
    failures = {address: rng.randint(0, threshold - 1) for address in ips}
    failures[ips[0]] = threshold + len(ips) + 2
    for address in rng.sample(ips[1:], max(1, len(ips) // 3)):
        failures[address] = rng.randint(threshold, threshold + len(ips))
    events: list[Event] = []
    for address, count in failures.items():
        events += [("Failed", rng.choice(USERS), address) for _ in range(count)]
        events += [("Accepted", rng.choice(USERS), address) for _ in range(rng.randint(0, 1))]
    rng.shuffle(events)
    if level == 3:
        suspicious = [a for a, c in failures.items() if c >= threshold]
        for address in rng.sample(suspicious, max(1, len(suspicious) // 2)):
            events.append(("Accepted", rng.choice(USERS), address))
    return events


def _render(rng: random.Random, events: list[Event]) -> str:
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
    return "\n".join(lines) + "\n"


def _failures(events: list[Event], field: int) -> dict[str, int]:
    """`Failed password` lines per user (`field` 1) or per IP (`field` 2)."""
    counts: dict[str, int] = {}
    for event in events:
        if event[0] == "Failed":
            counts[event[field]] = counts.get(event[field], 0) + 1
    return counts


def _count_by(log: str, field: str) -> str:
    """Shell: `COUNT VALUE` lines of failures per `field` (an awk field), most first."""
    return f"grep 'Failed password' {log} | awk '{{print {field}}}' | sort | uniq -c | sort -rn"


IP_FIELD, USER_FIELD = "$(NF-3)", "$(NF-5)"


def _level_one(rng: random.Random, events: list[Event], log: str, out: str) -> Question:
    """One pipeline answers it."""
    intro = f"`{log}` is an sshd log. "
    mistake = Mistake(0, f"grep -c 'Failed password' /var/log/{log.rsplit('/', 1)[1]}", "count failures")
    ask = rng.choice(("top-ip", "top-user", "user-failures", "ip-failures", "logins", "sources"))
    if ask == "top-user":
        by_user = _failures(events, 1)
        leaders = sorted(u for u, c in by_user.items() if c == max(by_user.values()))
        if len(leaders) > 1:  # one clear answer: one more failure for one of the tied users
            events.insert(rng.randrange(len(events) + 1), ("Failed", leaders[0], rng.choice(events)[2]))
        return (
            intro + f"Which user name has the most `Failed password` lines? Write just that name to `{out}`.",
            [Step(f"{_count_by(log, USER_FIELD)} | head -1 | awk '{{print $2}}' > {out}", "top user")],
            [leaders[0]],
            ["grep", "uniq", "ssh"],
            mistake,
        )
    if ask == "top-ip":
        by_ip = _failures(events, 2)
        return (
            intro + "Which client IP address has the most `Failed password` lines? Write just that "
            f"address to `{out}`.",
            [Step(f"{_count_by(log, IP_FIELD)} | head -1 | awk '{{print $2}}' > {out}", "top source")],
            [max(by_ip, key=lambda a: by_ip[a])],
            ["grep", "uniq", "ssh"],
            mistake,
        )
    if ask == "user-failures":
        by_user = _failures(events, 1)
        user = rng.choice(sorted(by_user))
        return (
            intro + f"How many `Failed password` lines are there for the user `{user}`? Write just the "
            f"number to `{out}`.",
            [Step(f"grep -c 'Failed password for {user} from' {log} > {out}", "count that user's failures")],
            [str(by_user[user])],
            ["grep", "ssh"],
            mistake,
        )
    if ask == "ip-failures":
        by_ip = _failures(events, 2)
        address = rng.choice(sorted(by_ip))
        return (
            intro + f"How many `Failed password` lines come from the client IP address `{address}`? Write "
            f"just the number to `{out}`.",
            [
                Step(
                    f"grep 'Failed password' {log} | grep -cF ' from {address} port ' > {out}",
                    "count that source's failures",
                )
            ],
            [str(by_ip[address])],
            ["grep", "ssh"],
            mistake,
        )
    if ask == "logins":
        if not any(kind == "Accepted" for kind, _, _ in events):
            events.insert(rng.randrange(len(events) + 1), ("Accepted", rng.choice(USERS), events[0][2]))
        users = sorted({user for kind, user, _ in events if kind == "Accepted"})
        return (
            intro + "Which user names have at least one `Accepted password` line? Write them to "
            f"`{out}`, each once, one per line, sorted as text.",
            [
                Step(
                    f"grep 'Accepted password' {log} | awk '{{print {USER_FIELD}}}' | sort -u > {out}",
                    "users who logged in",
                )
            ],
            users,
            ["grep", "awk", "ssh"],
            mistake,
        )
    return (
        intro + "How many distinct client IP addresses have at least one `Failed password` line? Write "
        f"just the number to `{out}`.",
        [
            Step(
                f"grep 'Failed password' {log} | awk '{{print {IP_FIELD}}}' | sort -u | wc -l > {out}",
                "count failing sources",
            )
        ],
        [str(len(_failures(events, 2)))],
        ["grep", "awk", "ssh"],
        mistake,
    )


def _level_two(rng: random.Random, events: list[Event], threshold: int, log: str, out: str) -> Question:
    """A threshold over failure counts; the answer's shape is drawn too."""
    look = Step(f"head -5 {log}", "look at the format")
    mistake = Mistake(1, f"awk '$1 >= {threshold}' {log}.1", "filter by count")
    by_ip = _failures(events, 2)
    over = sorted(a for a, c in by_ip.items() if c >= threshold)
    intro = f"`{log}` is an sshd log. "
    ask = rng.choice(("ips", "users", "counts", "how-many"))
    if ask == "users":
        by_user = _failures(events, 1)
        return (
            intro + f"List every user name with at least {threshold} `Failed password` lines, sorted as "
            f"text, one per line, in `{out}` (an empty file if there is none).",
            [
                look,
                Step(
                    f"{_count_by(log, USER_FIELD)} | awk '$1 >= {threshold} {{print $2}}' | sort > {out}",
                    "users over the threshold",
                ),
            ],
            sorted(u for u, c in by_user.items() if c >= threshold),
            ["grep", "awk", "ssh"],
            mistake,
        )
    if ask == "counts":
        ranked = sorted(over, key=lambda a: (-by_ip[a], a))
        return (
            intro + f"For every client IP address with at least {threshold} `Failed password` lines, "
            f"write a line `IP COUNT` (the address, a space, its number of failures) to `{out}`, most "
            "failures first, ties sorted by address as text.",
            [
                look,
                Step(
                    f"{_count_by(log, IP_FIELD)} | awk '$1 >= {threshold} {{print $2, $1}}' "
                    f"| sort -k2,2nr -k1,1 > {out}",
                    "IPs over the threshold with their counts",
                ),
            ],
            [f"{a} {by_ip[a]}" for a in ranked],
            ["grep", "awk", "sort", "ssh"],
            mistake,
        )
    if ask == "how-many":
        return (
            intro + f"How many client IP addresses have at least {threshold} `Failed password` lines? "
            f"Write just the number to `{out}`.",
            [
                look,
                Step(f"{_count_by(log, IP_FIELD)} | awk '$1 >= {threshold}' | wc -l > {out}", "count them"),
            ],
            [str(len(over))],
            ["grep", "awk", "ssh"],
            mistake,
        )
    return (
        intro + f"List every client IP address with at least {threshold} `Failed password` lines, sorted "
        f"as text, one per line, in `{out}`.",
        [
            look,
            Step(
                f"{_count_by(log, IP_FIELD)} | awk '$1 >= {threshold} {{print $2}}' | sort > {out}",
                "IPs over the threshold",
            ),
        ],
        over,
        ["grep", "awk", "ssh"],
        mistake,
    )


def _level_three(rng: random.Random, events: list[Event], threshold: int, log: str, out: str) -> Question:
    """Order matters: a login counts only after the source's failures reached the threshold."""
    compromised: set[tuple[str, str]] = set()
    seen_fail: dict[str, int] = {}
    for kind, user, address in events:
        if kind == "Failed":
            seen_fail[address] = seen_fail.get(address, 0) + 1
        elif seen_fail.get(address, 0) >= threshold:
            compromised.add((address, user))
    shape = rng.choice((*PAIR_FORMATS, "users"))
    if shape == "users":
        answer = sorted({user for _, user in compromised})
        what = "each such compromised user name once"
        entry = "user"
    else:
        answer = sorted(shape.format(ip=a, user=u) for a, u in compromised)
        what = f"each such pair once as a line `{shape.format(ip='IP', user='USER')}`"
        entry = f"{shape!r}.format(ip=ip, user=user)"
    script = (
        "python3 - <<'PY'\nimport re\nfails, hits = {}, set()\n"
        f"for line in open({log!r}):\n"
        "    m = re.search(r'(Failed|Accepted) password for (\\S+) from (\\S+)', line)\n"
        "    if not m:\n        continue\n    kind, user, ip = m.groups()\n"
        "    if kind == 'Failed':\n        fails[ip] = fails.get(ip, 0) + 1\n"
        f"    elif fails.get(ip, 0) >= {threshold}:\n        hits.add({entry})\n"
        f"open({out!r}, 'w').write(''.join(h + '\\n' for h in sorted(hits)))\nPY"
    )
    return (
        f"`{log}` is an sshd log, in time order. An IP is brute-forcing once it has {threshold} or more "
        "`Failed password` lines so far; a later `Accepted password` line from that IP means the account "
        f"was probably compromised. Write {what}, sorted as text, one per line, to `{out}` (an empty file "
        "if none).",
        [
            Step(f"head -5 {log}", "look at the format"),
            Step(f"{_count_by(log, IP_FIELD)} | head", "see the noisiest sources"),
            Step(script, "find logins after brute force"),
            Step(f"cat {out}", "check"),
        ],
        answer,
        ["python", "ssh", "incident-response"],
        Mistake(2, 'python3 -c "import pandas"', "try pandas for the log"),
    )

import os
import random
import string

rng = random.Random(8129)
up = string.ascii_uppercase + string.digits
alnum = string.ascii_letters + string.digits
files = ["src/app.py", "src/config/settings.py", "deploy/env.sh", "docs/README.md", "tests/fixtures.json",
         ".git/config", "scripts/backup.sh", "notes/todo.txt", "infra/terraform.tfvars", "keys/id_deploy"]
for path in files:
    os.makedirs(os.path.dirname(f"/app/repo/{path}"), exist_ok=True)
    lines = []
    for _ in range(rng.randint(20, 60)):
        r = rng.random()
        if r < 0.05:
            lines.append(f'AWS_KEY = "AKIA{"".join(rng.choice(up) for _ in range(16))}"')
        elif r < 0.08:
            lines.append("example: AKIAIOSFODNN7EXAMPLE")
        elif r < 0.11:
            lines.append(f"token=ghp_{''.join(rng.choice(alnum) for _ in range(36))} # ci")
        elif r < 0.13:
            lines.append(f"bad=ghp_{''.join(rng.choice(alnum) for _ in range(30))}")
        elif r < 0.15:
            lines.append(f"id: XAKIA{''.join(rng.choice(up) for _ in range(16))}")
        elif r < 0.17:
            lines.append(f"-----BEGIN {rng.choice(['RSA ', 'EC ', 'OPENSSH ', ''])}PRIVATE KEY-----")
        elif r < 0.18:
            lines.append("-----BEGIN PUBLIC KEY-----")
        elif r < 0.19:
            lines.append(f"two=AKIA{''.join(rng.choice(up) for _ in range(16))},AKIA{''.join(rng.choice(up) for _ in range(16))}")
        else:
            lines.append(f"value_{rng.randint(0, 999)} = {rng.random():.5f}")
    open(f"/app/repo/{path}", "w").write("\n".join(lines) + "\n")

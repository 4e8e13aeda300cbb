import os
import random

rng = random.Random(8114)
dirs = ["", "assets", "assets/img", "bin", "app/bin", "app/lib", "certs", "scripts", "app/bin/tools"]
for d in dirs:
    os.makedirs(f"/srv/www/{d}", exist_ok=True)
names = ["index.html", "run.sh", "server.key", "cert.pem", "main.py", "deploy", "notes.txt", "backup.sh.bak"]
for i in range(60):
    p = f"/srv/www/{rng.choice(dirs)}/{i:02d}-{rng.choice(names)}".replace("//", "/")
    with open(p, "w") as f:
        f.write(f"content {i} {rng.random()}\n")
    os.chmod(p, rng.choice([0o777, 0o600, 0o644, 0o711, 0o400, 0o666, 0o755, 0o750]))
os.symlink("/srv/www/index-missing.html", "/srv/www/latest")
for d in dirs:
    os.chmod(f"/srv/www/{d}", rng.choice([0o700, 0o777, 0o755, 0o711, 0o750]))

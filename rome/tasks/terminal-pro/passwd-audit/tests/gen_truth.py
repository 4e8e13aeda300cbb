import os
import random

rng = random.Random(8115)
os.makedirs("/app/etc", exist_ok=True)
shells = ["/bin/bash", "/bin/sh", "/usr/sbin/nologin", "/bin/false", "/bin/zsh", "/sbin/nologin"]
users = [("root", 0, 0, "/bin/bash")]
for i in range(70):
    uid = rng.choice([0] + [1000 + rng.randint(0, 60)] * 12 + [rng.randint(1, 999)] * 3)
    users.append((f"user{i:02d}", uid, rng.choice([0, 27, 10, 100, 1000]), rng.choice(shells)))
with open("/app/etc/passwd", "w") as f:
    f.write("# managed by config management\n")
    for name, uid, gid, sh in users:
        f.write(f"{name}:x:{uid}:{gid}:{name.title()},,,:/home/{name}:{sh}\n")
    f.write("\n")
with open("/app/etc/shadow", "w") as f:
    for name, *_ in users:
        pw = "" if rng.random() < 0.1 else rng.choice(["!", "*", "$6$salt$" + "%030x" % rng.getrandbits(120)])
        f.write(f"{name}:{pw}:19700:0:99999:7:::\n")
with open("/app/etc/group", "w") as f:
    f.write("root:x:0:\n")
    f.write("sudo:x:27:" + ",".join(sorted({u[0] for u in rng.sample(users, 8)})) + "\n")
    f.write("wheel:x:10:" + ",".join(sorted({u[0] for u in rng.sample(users, 5)})) + "\n")
    f.write("users:x:100:\n")
    f.write("staff:x:1000:" + ",".join(u[0] for u in rng.sample(users, 6)) + "\n")

import datetime as dt
import random

rng = random.Random(8132)
t = dt.datetime(2025, 3, 4, 6, 0, 0)
ips = [f"{rng.choice([10, 172, 192, 203])}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
       for _ in range(40)]
users = ["root", "admin", "ubuntu", "deploy", "alice", "bob", "git", "test"]
events = []
for _ in range(1500):
    t += dt.timedelta(seconds=rng.choice([0, 1, 2, 3, 5, 8, 13, 30, 120]))
    ip = rng.choice(ips)
    r = rng.random()
    if r < 0.025:  # a burst
        for _ in range(rng.randint(2, 7)):
            t += dt.timedelta(seconds=rng.randint(1, 20))
            u = rng.choice(users)
            events.append((t, f"Failed password for {'invalid user ' if rng.random() < 0.4 else ''}{u} from {ip} port {rng.randint(1024, 65535)} ssh2"))
        if rng.random() < 0.3:
            events.append((t, f"message repeated {rng.randint(2, 4)} times: [ Failed password for root from {ip} port 22 ssh2]"))
    elif r < 0.3:
        events.append((t, f"Failed password for {rng.choice(users)} from {ip} port {rng.randint(1024, 65535)} ssh2"))
    elif r < 0.32:
        events.append((t, f"Accepted {rng.choice(['password', 'publickey'])} for {rng.choice(users)} from {ip} port {rng.randint(1024, 65535)} ssh2"))
    elif r < 0.5:
        events.append((t, f"Disconnected from authenticating user root {ip} port 22 [preauth]"))
    else:
        events.append((t, f"pam_unix(sshd:session): session closed for user {rng.choice(users)}"))
with open("/app/auth.log", "w") as f:
    for when, msg in events:
        f.write(f"{when.strftime('%b')} {when.day:>2} {when.strftime('%H:%M:%S')} bastion sshd[{rng.randint(1000, 9999)}]: {msg}\n")

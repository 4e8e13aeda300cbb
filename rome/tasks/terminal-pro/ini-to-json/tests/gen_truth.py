import random

rng = random.Random(8122)
out = ["; sample configuration", "top_level = 1"]
for s in range(5):
    out.append(f"[ section{rng.randint(1, 4)} ]")
    for _ in range(rng.randint(2, 6)):
        k = rng.choice(["Host", "port", "debug", "path", "retries", "flag", "Name", "url"])
        v = rng.choice(["localhost", str(rng.randint(-5, 9000)), "Yes", "off", "/var/lib/x", "a=b:c",
                        "http://x:80/", "  spaced  ", "12abc"])
        out.append(f"{k}{rng.choice([' = ', '=', ': ', ' :'])}{v}")
    out.append(rng.choice(["", "# comment", "   ; indented comment", "standalone_key"]))
open("/app/sample.ini", "w").write("\n".join(out) + "\n")

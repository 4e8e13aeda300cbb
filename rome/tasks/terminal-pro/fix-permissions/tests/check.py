import os
import stat
import sys

seen = 0
for root, dirs, files in os.walk("/srv/www"):
    for name in dirs:
        p = os.path.join(root, name)
        if not os.path.islink(p) and stat.S_IMODE(os.lstat(p).st_mode) != 0o755:
            sys.exit(f"{p}: mode {oct(stat.S_IMODE(os.lstat(p).st_mode))}, expected 0o755")
    for name in files:
        p = os.path.join(root, name)
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            continue
        seen += 1
        if name.endswith((".key", ".pem")):
            want = 0o600
        elif name.endswith(".sh") or "bin" in os.path.relpath(root, "/srv/www").split(os.sep):
            want = 0o750
        else:
            want = 0o644
        if stat.S_IMODE(st.st_mode) != want:
            sys.exit(f"{p}: mode {oct(stat.S_IMODE(st.st_mode))}, expected {oct(want)}")
        if not open(p).read().startswith("content "):
            sys.exit(f"{p}: contents changed")
if stat.S_IMODE(os.stat("/srv/www").st_mode) != 0o755:
    sys.exit("/srv/www itself must be 755")
if seen != 60 or not os.path.islink("/srv/www/latest"):
    sys.exit(f"files or links were removed ({seen} regular files left, 60 expected)")
print("permissions ok")

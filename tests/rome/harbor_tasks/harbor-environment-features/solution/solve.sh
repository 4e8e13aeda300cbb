echo 42 > "$TARGET"
pwd > /srv/agent-cwd
mkdir -p /srv/report && echo done > /srv/report/summary.txt

# The agent phase asks for no network: the package cache's forwarder must lead nowhere now.
probe() { (exec 3<>/dev/tcp/127.0.0.1/3141 && printf 'GET /root/pypi/+simple/six/ HTTP/1.0\r\n\r\n' >&3 && head -c 5 <&3) 2>/dev/null; }
[ "$(probe)" = "HTTP/" ] && echo reached > /srv/agent-net || echo blocked > /srv/agent-net
echo 42 > "$TARGET"
pwd > /srv/agent-cwd
mkdir -p /srv/report && echo done > /srv/report/summary.txt

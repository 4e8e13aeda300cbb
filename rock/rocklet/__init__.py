"""The in-sandbox server: shell sessions, exec, files and a TCP forwarder, served over HTTP on a unix socket.

The server side (`__main__`, `server`, `wire`, `shell`, `oneshot`, `files`, `forwarder`, `output`, `procs`,
`errors`) uses the standard library only, so it starts fast from the bundled runtime (rock.runtime) in images
that have no Python of their own. The client side (`client`, `types`) uses httpx and pydantic on the host.
"""

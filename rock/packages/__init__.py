"""The fleet's package cache (PyPI through devpi-server, Debian through apt-cacher) for the `packages`
network policy: see `rock.packages.cache` and `rock.worker.packages`."""

"""The ROCK admin: control plane of the fleet (API, store, placement, admission, reaper)."""

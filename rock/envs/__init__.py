"""GEM environments hosted on ROCK: each in its own sandbox, behind `make/reset/step/close/list` routes.

This package is the service: `rock envs serve --admin URL` (or mount `rock.envs.routes.env_router(EnvHub(
admin_url))` in another app). The client, `rock.make(env_id, url=...)`, and the routes' wire types and errors
are the SDK's (`rock.sdk.envs`, `rock.sdk.env_types`, `rock.sdk.env_errors`), so a trainer plays hosted envs
without importing the service. Terminal tasks are environments of the task library
(`rome.terminal_tasks.env`), which drives their sandboxes through the SDK.
"""

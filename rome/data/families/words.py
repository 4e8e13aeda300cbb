"""Word pools the families draw names and text from (fixed lists, so instances are stable across versions)."""

import random

WORDS = [
    "amber",
    "basil",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kestrel",
    "lumen",
    "maple",
    "nectar",
    "onyx",
    "pebble",
    "quartz",
    "raven",
    "sierra",
    "tundra",
    "umber",
    "violet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
    "copper",
    "meadow",
    "orbit",
    "prism",
]
USERS = [
    "alice",
    "bob",
    "carol",
    "dave",
    "erin",
    "frank",
    "grace",
    "heidi",
    "ivan",
    "judy",
    "mallory",
    "oscar",
    "peggy",
    "trent",
    "victor",
    "wendy",
]
HOSTS = ["web01", "web02", "db01", "cache01", "batch01", "edge01"]
REGIONS = ["north", "south", "east", "west", "central", "coastal", "highland"]
PRODUCTS = ["widget", "gadget", "sprocket", "gizmo", "bracket", "flange", "spindle", "valve"]


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def ip(rng: random.Random) -> str:
    return (
        f"{rng.choice((10, 172, 192, 203))}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    )


# Folders under /app that hold a task's program or data.
DIRS = ["tools", "scripts", "src", "bin", "jobs", "utils", "reports", "etl", "cli", "lib", "ops", "batch"]
# Names of the file a task asks its answer to be written to (under /app).
OUTPUT_NAMES = [
    "answer.txt",
    "result.txt",
    "out.txt",
    "report.txt",
    "findings.txt",
    "value.txt",
    "summary.txt",
    "verdict.txt",
]

import random
import sys
from fractions import Fraction

import pytest

sys.path.insert(0, "/app")
from ratelimit import TokenBucket  # noqa: E402


class Reference:
    def __init__(self, capacity, rate):
        self.cap, self.rate = Fraction(capacity), Fraction(rate)
        self.tokens, self.last = self.cap, None

    def refill(self, now):
        now = Fraction(now)
        if self.last is not None:
            self.tokens = min(self.cap, self.tokens + (now - self.last) * self.rate)
        self.last = now

    def allow(self, now, cost):
        self.refill(now)
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        return False

    def wait(self, now, cost):
        self.refill(now)
        return max(Fraction(0), (cost - self.tokens) / self.rate)


def replay(capacity, rate, events):
    bucket, ref = TokenBucket(capacity, rate), Reference(capacity, rate)
    for i, (now, cost, probe) in enumerate(events):
        if probe:
            assert bucket.wait_time(now, cost) == pytest.approx(float(ref.wait(now, cost)), abs=1e-9), f"event {i}"
        else:
            assert bucket.allow(now, cost) == ref.allow(now, cost), f"event {i}: allow({now}, {cost})"


def test_recorded_traffic():
    rows = [l.strip().split(",") for l in open("/app/traffic.csv")][1:]
    replay(10, 4, [(float(t), int(c), False) for t, c in rows])


@pytest.mark.parametrize("seed", range(40))
def test_random_traffic(seed):
    rng = random.Random(seed)
    cap, rate = rng.randint(1, 20), rng.choice([0.5, 1, 2, 3, 7.5])
    now, events = 0.0, []
    for _ in range(400):
        now += rng.choice([0, 0, 0.1, 0.2, 0.5, 1, 3])
        events.append((now, rng.randint(1, cap), rng.random() < 0.3))
    replay(cap, rate, events)


def test_invalid_arguments():
    for bad in ((0, 1), (5, 0), (-1, 1)):
        with pytest.raises(ValueError):
            TokenBucket(*bad)
    with pytest.raises(ValueError):
        TokenBucket(3, 1).wait_time(0.0, 4)


def test_inputs_untouched():
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "/tests/inputs_intact.py"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr

#!/bin/bash
cat > /app/ratelimit.py <<'PY'
from fractions import Fraction


class TokenBucket:
    def __init__(self, capacity, rate):
        if capacity <= 0 or rate <= 0:
            raise ValueError("capacity and rate must be positive")
        self.capacity = Fraction(capacity)
        self.rate = Fraction(rate)
        self._tokens = self.capacity
        self._last = None

    def _refill(self, now):
        now = Fraction(now)
        if self._last is not None:
            self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def allow(self, now, cost=1):
        self._refill(now)
        if self._tokens >= cost:
            self._tokens -= cost
            return True
        return False

    def wait_time(self, now, cost=1):
        if cost > self.capacity:
            raise ValueError("cost exceeds the bucket's capacity")
        self._refill(now)
        return float(max(Fraction(0), (cost - self._tokens) / self.rate))
PY

"""A train set that covers what its families ask: each family's train instances spread evenly over the
operations its instances ask for (`Instance.variant`: numeric's statistic, file-ops' operation, ...).

Eight seeds drawn in a row can ask one operation five times and another never: the policy then learns the
common one and meets the others first in the held-out set. Pure: a family's instances in, a choice out.
"""

from __future__ import annotations

from collections.abc import Callable

from rome.data.families.base import Instance


class NotEnoughOperations(ValueError):
    """The seeds tried hold too few instances of some operation for an even train set."""


def balanced_instances(
    make: Callable[[int], Instance], first_seed: int, count: int, max_seeds: int, what: str
) -> list[Instance]:
    """`count` instances from seeds `first_seed .. first_seed + max_seeds - 1`, taking turns over the
    operations those seeds ask for (in name order): the i-th is the first seed not taken yet whose operation
    is the (i mod n)-th of n. A family that names no operations gives the first `count` seeds. Returned in
    seed order."""
    candidates = [make(seed) for seed in range(first_seed, first_seed + max_seeds)]
    operations = sorted({c.variant for c in candidates})
    left = {op: [c for c in candidates if c.variant == op] for op in operations}
    chosen: list[Instance] = []
    for index in range(count):
        operation = operations[index % len(operations)]
        if not left[operation]:
            wanted = count // len(operations) + (operations.index(operation) < count % len(operations))
            available = sum(1 for c in candidates if c.variant == operation)
            raise NotEnoughOperations(
                f"{what}: only {available} of seeds {first_seed}..{first_seed + max_seeds - 1} ask for "
                f"{operation!r}, and spreading {count} train instances over its {len(operations)} operations "
                f"needs {wanted}; lower train_per_family or set env.data.balance_train: false"
            )
        chosen.append(left[operation].pop(0))
    return sorted(chosen, key=lambda instance: instance.seed)

"""A balanced train set (rome.data.balance): each family's train instances take turns over the operations
its instances ask for, computed by hand on a made-up family and checked on the recipe's real ones."""

from __future__ import annotations

import pytest

from rome.data.balance import NotEnoughOperations, balanced_instances
from rome.data.families import get_family
from rome.data.families.base import Instance

ASKED = ["a", "a", "a", "b", "a", "c", "a", "b", "a", "a"]


def made(seed: int, asked: list[str] = ASKED) -> Instance:
    return Instance(
        family="made-up",
        seed=seed,
        knobs={},
        instruction=f"task {seed}",
        files={},
        steps=[],
        check="",
        expected={},
        domain="test",
        variant=asked[seed],
    )


def test_each_operation_takes_its_turn_in_name_order() -> None:
    # Turns a, b, c, a, b: a's first two seeds (0, 1), b's (3, 7), c's only one (5).
    chosen = balanced_instances(made, 0, 5, len(ASKED), "made-up")
    assert [i.seed for i in chosen] == [0, 1, 3, 5, 7]


def test_a_family_that_names_no_operation_gives_its_first_seeds() -> None:
    chosen = balanced_instances(lambda seed: made(seed, [""] * 10), 2, 3, 8, "made-up")
    assert [i.seed for i in chosen] == [2, 3, 4]


def test_too_few_seeds_of_an_operation_stop_with_what_to_change() -> None:
    # Six over a, b, c wants c twice; seeds 0..9 ask it once.
    with pytest.raises(
        NotEnoughOperations,
        match=r"made-up: only 1 of seeds 0\.\.9 ask for 'c', and spreading 6 train instances over its 3 "
        r"operations needs 2; lower train_per_family or set env\.data\.balance_train: false",
    ):
        balanced_instances(made, 0, 6, len(ASKED), "made-up")


@pytest.mark.parametrize(
    ("family", "operations"),
    [
        ("numeric", {"mean", "sum", "min", "max", "above"}),
        ("text-search", {"lines", "with", "without"}),
        ("file-ops", {"exec", "mode", "moved", "copied"}),
        ("csv-rollup", {"count", "sum", "min", "max"}),
        ("line-filter", {"with", "without", "head", "tail"}),
    ],
)
def test_the_recipes_families_name_the_operation_each_instance_asks(
    family: str, operations: set[str]
) -> None:
    made_here = [get_family(family).make(seed, {"level": 1}) for seed in range(200)]
    assert {i.variant for i in made_here} == operations
    chosen = balanced_instances(lambda seed: get_family(family).make(seed, {"level": 1}), 0, 8, 128, family)
    counts = [sum(1 for i in chosen if i.variant == op) for op in sorted(operations)]
    assert max(counts) - min(counts) <= 1

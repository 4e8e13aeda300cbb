"""Which processes the pids guard may kill: ownership by ancestry, on hand-made process tables."""

from rock.rocklet.runaway import _owned

# pid -> parent. 1: rocklet; 10: a session shell; 11: a job an earlier command left; 12: its child;
# 13: the running command; 14: its child; 20: an orphan re-parented to the rocklet; 30: a one-shot command.
TABLE = {1: 0, 10: 1, 11: 10, 12: 11, 13: 10, 14: 13, 20: 1, 30: 1, 31: 30}


def test_a_running_command_owns_its_descendants_but_not_earlier_jobs():
    busy = {10: frozenset({10, 11})}
    assert [pid for pid in (11, 12, 13, 14, 20, 31) if _owned(pid, TABLE, busy)] == [13, 14]


def test_an_idle_shell_owns_nothing_and_a_one_shot_command_owns_its_children():
    busy = {30: frozenset()}
    assert [pid for pid in (11, 12, 13, 14, 20, 31) if _owned(pid, TABLE, busy)] == [31]

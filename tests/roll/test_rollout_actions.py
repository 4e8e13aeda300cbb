from roll.rollout.gem_env import action_text


def test_a_reasoning_block_is_not_part_of_the_action() -> None:
    assert action_text("<think>\nls first\n</think>\n\nls -la /tmp") == "ls -la /tmp"


def test_only_the_text_after_the_last_block_is_the_action() -> None:
    assert action_text("<think>a</think>x</think> \\boxed{7}") == "\\boxed{7}"


def test_a_reply_without_reasoning_is_the_action_unchanged() -> None:
    assert action_text("  \\boxed{3}\n") == "  \\boxed{3}\n"


def test_an_unclosed_reasoning_block_stays_whole() -> None:
    assert action_text("<think>still thinking") == "<think>still thinking"

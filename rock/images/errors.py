"""Errors of the image tools; each says what went wrong and what to try."""


class ImageError(RuntimeError):
    """Base class of image errors."""


class ImageConfigError(ImageError):
    """The alias table file is malformed."""


class UnknownImage(ImageError):
    """A name that is neither in the alias table nor present locally."""


class ImageBuildError(ImageError):
    """`docker build` failed; `log_tail` holds the last lines of its output."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(
            f"{message}\n--- last lines of the build log ---\n{log_tail}" if log_tail else message
        )
        self.log_tail = log_tail


class BootstrapError(ImageError):
    """A step of `rock image bootstrap` failed."""

    def __init__(self, step: str, problem: str, hint: str) -> None:
        super().__init__(f"bootstrap step '{step}' failed: {problem}\nwhat to try: {hint}")
        self.step = step
        self.hint = hint

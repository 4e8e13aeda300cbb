"""Command-line options generated from a pydantic config model, so a CLI and the model share one schema.

`@model_options(Model)` gives a typer command one `--field-name` option per field of `Model` (its help the
field's description, its default the field's default, its range the field's bounds, a `Literal` field a
choice) and calls the command with the validated model instead of the loose values. A field is added to the
model once and the CLI has it; nothing is copied by hand between the two.

Fields whose type has no flag form (nested models, mappings) must be named in `exclude`: the decorator fails
at import time otherwise, so a new field cannot silently go missing from the CLI.
"""

from __future__ import annotations

import enum
import functools
import inspect
import types
import typing
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import annotated_types
import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

F = TypeVar("F", bound=Callable[..., Any])

_SCALARS = (str, int, float, bool, Path)


def model_options(
    model: type[BaseModel],
    *,
    param: str = "settings",
    exclude: Collection[str] = (),
    defaults: Mapping[str, Any] | None = None,
) -> Callable[[F], F]:
    """Decorate a typer command that takes `param: model`: its other parameters stay as they are, and each
    field of `model` not in `exclude` becomes an option. `defaults` replaces a field's default for this
    command only (the model's own default stays what the Python API and YAML files get)."""
    fields = {name: info for name, info in model.model_fields.items() if name not in exclude}
    overrides = dict(defaults or {})
    if unknown := sorted(set(overrides) - set(fields)):
        raise TypeError(f"model_options({model.__name__}): defaults for unknown fields {unknown}")
    generated = [_parameter(model, name, info, overrides) for name, info in fields.items()]

    def decorate(func: F) -> F:
        own = [p for p in inspect.signature(func, eval_str=True).parameters.values() if p.name != param]

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            values = {name: _plain(kwargs.pop(name)) for name in fields if kwargs.get(name) is not None}
            try:
                settings = model.model_validate(values)
            except ValidationError as error:
                problems = "; ".join(f"{_flag(str(e['loc'][0]))}: {e['msg']}" for e in error.errors())
                typer.secho(f"error: {problems}", fg=typer.colors.RED, err=True)
                raise typer.Exit(2) from None
            for name in fields:
                kwargs.pop(name, None)
            return func(**kwargs, **{param: settings})

        parameters = [*own, *generated]
        command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        # typer resolves annotations with get_type_hints: give it the resolved ones, not the module's strings.
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        return command  # type: ignore[return-value]

    return decorate


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _parameter(
    model: type[BaseModel], name: str, info: FieldInfo, overrides: Mapping[str, Any]
) -> inspect.Parameter:
    annotation, optional = _unwrap_optional(info.annotation)
    help_text = info.description or ""
    option: dict[str, Any] = {"help": help_text, "show_default": True}
    if typing.get_origin(annotation) is Literal:
        # typer offers choices through an Enum; the command gets the plain value back (see `_plain`).
        choices = {str(choice): str(choice) for choice in typing.get_args(annotation)}
        annotation = enum.Enum(f"{model.__name__}_{name}", choices, type=str)  # type: ignore[misc]
    elif annotation not in _SCALARS:
        raise TypeError(
            f"model_options({model.__name__}): field {name!r} ({info.annotation}) has no flag form; "
            "exclude it and set it another way"
        )
    # Closed bounds become the option's range (click names it in its error); open ones are left to the model.
    for bound in info.metadata:
        if isinstance(bound, annotated_types.Ge):
            option["min"] = bound.ge
        elif isinstance(bound, annotated_types.Le):
            option["max"] = bound.le
    if name in overrides:
        default = overrides[name]
    elif info.is_required():
        default = inspect.Parameter.empty
    else:
        default = info.get_default(call_default_factory=True)
    if isinstance(annotation, enum.EnumMeta) and default not in (None, inspect.Parameter.empty):
        default = annotation(str(default))
    flag_type: Any = annotation | None if optional or default is None else annotation
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        annotation=Annotated[flag_type, typer.Option(_flag(name), **option)],
        default=default,
    )


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    """`X | None` as (X, True); anything else as (annotation, False)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False

"""The ``env_kwargs`` field: read from --env-kwarg items, --set and TOML tables; checked; saved and read
back."""

from __future__ import annotations

import pytest

from a3c.core import config
from a3c.core.config import Config, check_env_kwargs, coerce, parse_kwargs, parse_set
from a3c.core.errors import BadInput


def test_items_read_their_values_as_json_else_as_text():
    items = ["continuous=true", "gravity=-9.5", "n=3", "sizes=[1, 2]", "mode=fast", "x=None", "y=False"]
    assert parse_kwargs(items) == {
        "continuous": True,
        "gravity": -9.5,
        "n": 3,
        "sizes": [1, 2],
        "mode": "fast",
        "x": None,
        "y": False,
    }


def test_set_splits_only_at_commas_that_start_a_key():
    assert parse_set(("env_kwargs=a=1,b=[2, 3],c=x",)) == {"env_kwargs": {"a": 1, "b": [2, 3], "c": "x"}}
    assert coerce("env_kwargs", {"continuous": True}) == {"continuous": True}  # a TOML table as is


@pytest.mark.parametrize("item", ["continuous", "=1", ""])
def test_an_item_without_a_key_is_refused_naming_the_option(item):
    with pytest.raises(BadInput, match=r"^--env-kwarg: .* is not allowed; expected key=value"):
        parse_kwargs([item], "--env-kwarg")


REFUSED = [{"render_mode": "human"}, {"seed": 1}, {"frame_stack": 2}, {"not a name": 1}, {"x": float("nan")}]


@pytest.mark.parametrize("kwargs", REFUSED)
def test_keys_a3c_sets_itself_and_values_json_cannot_hold_are_refused(kwargs):
    with pytest.raises(BadInput, match=r"^env_kwargs: .* is not allowed; expected keyword names"):
        Config(env_id="CartPole-v1", env_kwargs=kwargs).validate()


def test_saved_and_read_back_and_missing_from_an_older_config_means_none():
    config = Config(env_id="LunarLander-v3", env_kwargs={"continuous": True}).validate()
    assert Config.from_dict(config.to_dict()) == config
    older = {k: v for k, v in config.to_dict().items() if k != "env_kwargs"}
    assert Config.from_dict(older).env_kwargs == {}


DEEP = 3000  # past what Python's JSON and TOML readers recurse through
MAX_ENV_KWARGS_DEPTH = getattr(config, "MAX_ENV_KWARGS_DEPTH", 32)


def nested(depth: int) -> str:
    """A JSON array ``depth`` levels deep."""
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("read", "field"),
    [
        (lambda depth: parse_kwargs([f"x={nested(depth)}"], "--env-kwarg"), "--env-kwarg"),
        (lambda depth: parse_set((f"env_kwargs=x={nested(depth)}",)), "env_kwargs"),
        # a TOML table, the Python API's dict
        (lambda depth: coerce("env_kwargs", {"x": json_nested(depth)}), "env_kwargs"),
        (lambda depth: check_env_kwargs({"x": json_nested(depth)}), "env_kwargs"),
    ],
)
@pytest.mark.parametrize("depth", [MAX_ENV_KWARGS_DEPTH + 1, DEEP])
def test_a_value_nested_too_deep_is_one_line_naming_the_field_and_the_depth(read, field, depth):
    with pytest.raises(BadInput) as bad:
        read(depth)
    assert str(bad.value) == (
        f"{field}: 'x' is nested more than {MAX_ENV_KWARGS_DEPTH} levels deep; expected JSON values nested "
        f"at most {MAX_ENV_KWARGS_DEPTH} levels"
    )


def json_nested(depth: int) -> list:
    """A list ``depth`` levels deep, built without recursion."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_value_nested_as_deep_as_allowed_is_kept():
    kwargs = parse_kwargs([f"x={nested(MAX_ENV_KWARGS_DEPTH)}"])
    assert check_env_kwargs(kwargs) == {"x": json_nested(MAX_ENV_KWARGS_DEPTH)}


@pytest.mark.parametrize("depth", [MAX_ENV_KWARGS_DEPTH + 1, DEEP])
def test_a_config_file_nested_too_deep_is_one_line(tmp_path, depth):
    from a3c.training.resolve import read_config_file

    path = tmp_path / "deep.toml"
    path.write_text(f"[env_kwargs]\nx = {nested(depth)}\n")
    with pytest.raises(BadInput) as bad:
        read_config_file(path)
    assert str(bad.value).endswith(
        f"is nested more than {MAX_ENV_KWARGS_DEPTH} levels deep; expected JSON values nested at most "
        f"{MAX_ENV_KWARGS_DEPTH} levels"
    )
    assert "\n" not in str(bad.value)


def test_another_field_nested_past_what_repr_reaches_is_one_line_too():
    # The Python API's hidden_sizes=[[[...]]]: the error shows the value abridged.
    with pytest.raises(BadInput, match=r"^hidden_sizes: \[\[\[\[\[\[\[\.\.\.\]\]\]\]\]\]\] is not allowed; "):
        coerce("hidden_sizes", json_nested(DEEP))

"""The ``env_kwargs`` field: read from --env-kwarg items, --set and TOML tables; checked; saved and read
back."""

from __future__ import annotations

import pytest

from a3c.core.config import Config, coerce, parse_kwargs, parse_set
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

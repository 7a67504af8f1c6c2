"""--set parsing, Config validation and the precedence of defaults, env spec, preset, options and --set."""

from __future__ import annotations

import dataclasses
import re

import pytest

import a3c.core.config as config_module
import a3c.training.resolve
from a3c.core.config import RETIRED_FIELDS, Config, parse_set, parse_values
from a3c.core.errors import BadInput
from a3c.core.spaces import Spaces
from a3c.training.resolve import box_gamma, confirm_episodes, resolve_config
from a3c_envs import EnvInfo, inspect_env, load_preset
from tests.support.commands import call_a3c

# -- parse_set -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "key", "value"),
    [
        ("workers=4", "workers", 4),
        ("t_max= 32 ", "t_max", 32),
        ("max_steps=1e6", "max_steps", 1_000_000),
        ("lr=3e-4", "lr", 3e-4),
        ("gamma=1", "gamma", 1.0),
        ("shared_body=true", "shared_body", True),
        ("shared_body=False", "shared_body", False),
        ("shared_body=1", "shared_body", True),
        ("shared_body=no", "shared_body", False),
        ("hidden_sizes=64,64", "hidden_sizes", (64, 64)),
        ("hidden_sizes=128", "hidden_sizes", (128,)),
        ("hidden_sizes=32, 16, 8", "hidden_sizes", (32, 16, 8)),
        ("max_steps=none", "max_steps", None),
        ("max_seconds=None", "max_seconds", None),
        ("target_return=null", "target_return", None),
        ("max_seconds=90.5", "max_seconds", 90.5),
        ("target_return=-100", "target_return", -100.0),
        ("optimizer=rmsprop", "optimizer", "rmsprop"),
    ],
)
def test_parse_set_typed_values(item, key, value):
    parsed = parse_set((item,))
    assert parsed == {key: value}
    assert type(parsed[key]) is type(value)


def test_parse_set_several_items_later_wins():
    assert parse_set(("lr=0.1", "workers=3", "lr=0.2")) == {"lr": 0.2, "workers": 3}
    assert parse_set(()) == {}


@pytest.mark.parametrize("key", ["learning_rate", "env_id", "Workers", "hidden"])
def test_parse_set_unknown_key_names_it(key):
    with pytest.raises(BadInput, match=f"unknown key '{key}'"):
        parse_set((f"{key}=1",))


def test_parse_set_without_equals_sign():
    with pytest.raises(BadInput, match="key=value"):
        parse_set(("workers",))


@pytest.mark.parametrize(
    "item",
    [
        "workers=abc",
        "workers=1.5",
        "workers=",
        "lr=fast",
        "gamma=",
        "shared_body=maybe",
        "hidden_sizes=64,x",
        "hidden_sizes=64.5,64",
        "max_steps=ten",
        "eval_episodes=2.5",
    ],
)
def test_parse_set_bad_value(item):
    key = item.partition("=")[0]
    with pytest.raises(BadInput) as excinfo:
        parse_set((item,))
    assert str(excinfo.value).startswith(f"{key}:")


@pytest.mark.parametrize("item", ["workers=inf", "max_steps=1e400"])
def test_parse_set_infinite_integer_is_bad_input(item):
    with pytest.raises(BadInput):
        parse_set((item,))


# -- Config.validate -----------------------------------------------------------------------------------------


def test_defaults_validate():
    config = Config(env_id="CartPole-v1")
    assert config.validate() is config
    assert Config(env_id="CartPole-v1", gamma=1.0, workers=1, t_max=1, lr=1e-9).validate().gamma == 1.0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("workers", 0),
        ("workers", -2),
        ("lr", 0.0),
        ("lr", -1e-3),
        ("lr", float("inf")),
        ("gamma", 0.0),
        ("gamma", 1.5),
        ("gamma", -0.5),
        ("t_max", 0),
        ("envs_per_worker", 0),
        ("gae_lambda", 1.01),
        ("optimizer", "sgd"),
        ("hidden_sizes", ()),
        ("hidden_sizes", (64, 0)),
        ("max_steps", 0),
        ("eval_episodes", 0),
        ("eval_interval_steps", 0),
        ("metrics_interval_steps", -5),
        ("workers", 1025),
        ("envs_per_worker", 1025),
        ("eval_episodes", 1001),
        ("confirm_episodes", 1001),
        ("hang_timeout", 0.01),
        ("hang_timeout", 4.9),
        ("init_log_std", -4.6),
        ("init_log_std", 1.6),
        ("mean_l2_coef", -1e-3),
        ("mean_l2_coef", float("nan")),
    ],
)
def test_validate_rejects_with_field_and_value(field, value):
    with pytest.raises(BadInput) as excinfo:
        Config(env_id="CartPole-v1", **{field: value}).validate()
    message = str(excinfo.value)
    assert message.startswith(f"{field}:")
    assert repr(value) in message


def test_evaluations_by_steps_are_refused_on_ray_which_evaluates_by_time():
    with pytest.raises(BadInput, match=r"^eval_interval_steps: 5000 is not allowed with backend ray"):
        Config(env_id="CartPole-v1", backend="ray", eval_interval_steps=5000).validate()


def test_to_dict_round_trip():
    config = Config(env_id="CartPole-v1", hidden_sizes=(32, 16), max_steps=1000)
    data = config.to_dict()
    assert Config.from_dict(data) == config
    data["hidden_sizes"] = [32, 16]  # as JSON gives it back
    assert Config.from_dict(data) == config
    with pytest.raises(BadInput, match="unknown key 'nope'"):
        Config.from_dict({**config.to_dict(), "nope": 1})


def test_a_config_saved_with_the_removed_gradient_modes_fields_loads_without_them():
    # config.json and checkpoints of runs from before the Ray gradient mode was removed hold its fields (the
    # evaluate, export and resume of such a run read them through from_dict); a resume goes on in node mode.
    config = Config(env_id="CartPole-v1", backend="ray", max_steps=1000)
    saved = {**config.to_dict(), "ray_mode": "gradient", "sync_every": 4, "ray_overlap": True}
    assert set(RETIRED_FIELDS) == {"ray_mode", "sync_every", "ray_overlap"} and not set(RETIRED_FIELDS) & set(
        config.to_dict()
    )
    assert Config.from_dict(saved) == config


@pytest.mark.parametrize("item", ["ray_mode=gradient", "sync_every=4", "ray_overlap=false"])
def test_a_removed_gradient_mode_field_is_an_unknown_key_that_says_why(tmp_path, item):
    key = item.partition("=")[0]
    why = f"unknown key '{key}' (a field of the Ray backend's gradient mode, which was removed: node mode is "
    why += "the Ray backend); allowed: env_kwargs, seed,"
    result = call_a3c("train", "--env", "CartPole-v1", "--backend", "ray", "--set", item,
                      "--run-dir", str(tmp_path / "run"))  # fmt: skip
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: --set: {why}"), line
    assert not (tmp_path / "run").exists()
    with pytest.raises(BadInput, match=re.escape(f"{key}: unknown config key (a field of the Ray")):
        parse_values({key: item.partition("=")[2]})  # a3c.train(ray_mode=...)


# -- resolve_config ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cartpole():
    return inspect_env("CartPole-v1")


def test_preset_values_appear(cartpole):
    preset = load_preset("CartPole-v1")
    assert preset, "CartPole-v1 has a preset"
    config = resolve_config(cartpole, {}, {})
    for key, value in preset.items():
        expected = tuple(value) if isinstance(value, list) else value
        assert getattr(config, key) == expected, key
    assert config.env_id == "CartPole-v1"
    # A field the preset does not set keeps the dataclass default.
    for name in ("seed", "optimizer_eps", "max_steps", "max_seconds"):
        if name not in preset:
            assert getattr(config, name) == getattr(Config(env_id="x"), name), name


def test_no_preset_gives_the_derived_defaults(cartpole):
    config = resolve_config(cartpole, {"t_max": None}, {}, use_preset=False)
    # The spec's threshold, confirmed on 100 more episodes (gymnasium's thresholds are 100-episode means);
    # rewards scaled, as for every env with flat observations.
    expected = Config(env_id="CartPole-v1", target_return=475.0, confirm_episodes=100, reward_scale=True)
    assert config == expected
    assert resolve_config(cartpole, {}, {}) != config


@pytest.mark.parametrize(
    "max_episode_steps, expected", [(200, 100), (1000, 100), (2000, 50), (4000, 30), (27000, 30), (None, 30)]
)
def test_confirmation_is_derived_from_the_episode_limit(max_episode_steps, expected):
    assert confirm_episodes(max_episode_steps) == expected


@pytest.mark.parametrize(
    "max_episode_steps, expected",
    [(100, 0.98), (200, 0.98), (300, 0.986667), (400, 0.99), (1000, 0.99), (None, 0.99)],
)
def test_box_discount_is_derived_from_the_episode_limit(max_episode_steps, expected):
    assert box_gamma(max_episode_steps) == expected


def test_every_target_is_confirmed_unless_told_otherwise(cartpole, monkeypatch):
    monkeypatch.setattr(a3c.training.resolve, "load_preset", lambda env_id: {})
    assert resolve_config(cartpole, {"target_return": 50.0}, {}).confirm_episodes == 100  # the user's target
    assert resolve_config(cartpole, {}, {"confirm_episodes": 0}).confirm_episodes == 0  # --set wins
    no_target = dataclasses.replace(cartpole, reward_threshold=None)
    assert resolve_config(no_target, {}, {}).confirm_episodes == 0  # nothing to confirm


def test_no_preset_is_refused_with_resume(tmp_path):
    from a3c.training.options import train_setup

    with pytest.raises(BadInput, match="--no-preset: not allowed with --resume"):
        train_setup(None, {"no_preset": True}, (), run_dir=None, force=False, resume=tmp_path, serial=False)


def test_options_override_preset_and_set_overrides_options(cartpole):
    preset = load_preset("CartPole-v1")
    base = resolve_config(cartpole, {}, {})
    t_from_options = base.t_max + 3
    t_from_set = base.t_max + 7

    config = resolve_config(cartpole, {"t_max": t_from_options, "lr": None, "workers": None}, {})
    assert config.t_max == t_from_options
    assert config.lr == base.lr and config.workers == base.workers  # None means "not given"

    config = resolve_config(cartpole, {"t_max": t_from_options}, {"t_max": t_from_set})
    assert config.t_max == t_from_set

    if "target_return" in preset:
        config = resolve_config(cartpole, {"target_return": 10.0}, {})
        assert config.target_return == 10.0


def test_preset_beats_spec_threshold(cartpole, monkeypatch):
    monkeypatch.setattr(
        a3c.training.resolve, "load_preset", lambda env_id: {"target_return": 123.0, "workers": 3}
    )
    config = resolve_config(cartpole, {}, {})
    assert config.target_return == 123.0 and config.workers == 3
    assert resolve_config(cartpole, {"workers": 5}, {"workers": 6}).workers == 6


def test_preset_with_unknown_key_is_bad_input(cartpole, monkeypatch):
    monkeypatch.setattr(a3c.training.resolve, "load_preset", lambda env_id: {"learning_rate": 0.1})
    with pytest.raises(BadInput, match="preset of CartPole-v1: unknown key 'learning_rate'"):
        resolve_config(cartpole, {}, {})


def test_resolved_config_is_validated(cartpole):
    with pytest.raises(BadInput, match="gamma: 1.5"):
        resolve_config(cartpole, {}, {"gamma": 1.5})
    with pytest.raises(BadInput, match="workers: 0"):
        resolve_config(cartpole, {"workers": 0}, {})


def test_env_without_preset_gets_target_from_spec():
    assert load_preset("Acrobot-v1") is None
    info = inspect_env("Acrobot-v1")
    assert info.reward_threshold == -100.0
    config = resolve_config(info, {}, {})
    assert config.target_return == -100.0
    assert config.t_max == Config(env_id="x").t_max  # dataclass default, no preset
    assert resolve_config(info, {}, {"target_return": -80.0}).target_return == -80.0


# -- defaults derived from the env's spaces, and every preset ------------------------------------------------


def _info(shape, continuous, threshold=None):
    from a3c.core.spaces import Spaces
    from a3c_envs import EnvInfo

    bounds = ((-1.0,), (1.0,)) if continuous else ((), ())
    spaces = Spaces(shape, 1 if continuous else 4, continuous, *bounds)
    return EnvInfo("NoPreset-v0", spaces, threshold, None)


def test_image_observations_without_a_preset_get_the_conv_lstm():
    config = resolve_config(_info((1, 84, 84), False, 21.0), {}, {})
    assert (config.model, config.lstm_size, config.target_return) == ("cnn", 256, 21.0)
    # What Pong taught, for every image env; rewards scaled unless Atari's envs clip them
    assert (config.optimizer_eps, config.envs_per_worker, config.reward_scale) == (1e-5, 8, True)
    # A clip that binds on mean losses (the A3C paper's 40 never did); Pong's preset takes it too
    assert config.max_grad_norm == 0.5
    assert "max_grad_norm" not in load_preset("ALE/Pong-v5")
    breakout = dataclasses.replace(_info((1, 84, 84), False), env_id="ALE/Breakout-v5")
    atari = resolve_config(breakout, {}, {}, use_preset=False)
    assert (atari.optimizer_eps, atari.envs_per_worker, atari.reward_scale) == (1e-5, 8, False)
    with pytest.raises(BadInput, match="model: 'mlp' is not allowed"):
        resolve_config(_info((1, 84, 84), False), {}, {"model": "mlp"})


def test_box_actions_without_a_preset_get_a_gaussian_on_normalised_observations():
    config = resolve_config(_info((5,), True), {}, {})
    assert config.model == "mlp" and config.obs_norm and config.gaussian_std == "learned"
    # Chosen on five Box envs: tanh, Adam 1e-3, 16 envs per worker, with the tanh squash's small entropy bonus
    assert (config.squash, config.lr, config.envs_per_worker, config.entropy_coef) == ("tanh", 1e-3, 16, 1e-3)
    # A discount sized to the episode limit: Pendulum's 200 steps get 0.98, a limit unknown 0.99
    assert config.gamma == 0.99
    short = dataclasses.replace(_info((5,), True), max_episode_steps=200)
    assert resolve_config(short, {}, {}).gamma == 0.98
    assert resolve_config(short, {}, {"gamma": 0.9}).gamma == 0.9  # --set wins
    pendulum = inspect_env("Pendulum-v1")
    assert resolve_config(pendulum, {}, {}).gamma == 0.98  # what its preset was measured on, now derived
    assert resolve_config(pendulum, {}, {}, use_preset=False).gamma == 0.98
    assert resolve_config(inspect_env("MountainCarContinuous-v0"), {}, {}).gamma == 0.99  # 999 steps
    assert resolve_config(_info((5,), False), {}, {}).gamma == 0.99  # discrete actions: not derived
    assert resolve_config(_info((5,), False), {}, {}).squash == "clip"  # discrete: no Gaussian to squash
    flat = _info((5,), True)
    no_width = dataclasses.replace(flat, spaces=dataclasses.replace(flat.spaces, action_high=(-1.0,)))
    assert resolve_config(no_width, {}, {}).squash == "clip"  # low == high: no tanh to invert
    # MountainCarContinuous's preset keeps the Box defaults it was measured on
    mcc = dataclasses.replace(flat, env_id="MountainCarContinuous-v0")
    pinned = resolve_config(mcc, {}, {})
    assert (pinned.squash, pinned.lr, pinned.envs_per_worker, pinned.entropy_coef) == ("clip", 3e-4, 4, 0.0)
    with pytest.raises(BadInput, match="model: 'cnn' is not allowed"):
        resolve_config(_info((5,), True), {}, {"model": "cnn"})
    with pytest.raises(BadInput, match="lstm_size: 8 is not allowed with model mlp"):
        resolve_config(_info((5,), True), {}, {"lstm_size": 8})


def test_box_actions_get_no_entropy_bonus_and_discrete_ones_keep_it():
    # A learned σ, clipped actions: 0.01 drove HalfCheetah's and Pendulum's log σ to its cap.
    assert resolve_config(_info((5,), True), {}, {"squash": "clip"}).entropy_coef == 0.0
    assert resolve_config(_info((5,), False), {}, {}).entropy_coef == 0.01
    assert resolve_config(_info((5,), True), {}, {"entropy_coef": 0.02}).entropy_coef == 0.02  # --set wins
    # ... except a tanh squash, whose mean runs into tanh's flat tails without one.
    assert resolve_config(_info((5,), True), {}, {"squash": "tanh"}).entropy_coef == 1e-3
    assert resolve_config(_info((5,), True), {}, {"squash": "tanh", "entropy_coef": 0.0}).entropy_coef == 0.0
    assert resolve_config(_info((5,), False), {}, {"squash": "tanh"}).entropy_coef == 0.01  # Box only
    assert resolve_config(_info((1, 84, 84), True), {}, {}).entropy_coef == 0.0  # images too


@pytest.mark.parametrize("field,value", [("squash", "sigmoid"), ("gaussian_std", "fixed"), ("model", "rnn")])
def test_new_choice_fields_are_validated(field, value):
    with pytest.raises(BadInput, match=f"{field}: '{value}' is not allowed"):
        Config(env_id="x", **{field: value}).validate()


def test_every_preset_resolves_into_a_valid_config():
    from a3c_envs.presets import list_presets

    presets = list_presets()
    assert {p.env_id for p in presets} >= {
        "CartPole-v1",
        "Pendulum-v1",
        "MountainCarContinuous-v0",
        "HalfCheetah-v5",
        "ALE/Pong-v5",
        "ALE/Breakout-v5",
        "FrozenLake-v1",
    }
    for preset in presets:
        values = load_preset(preset.env_id)
        assert values is not None and preset.target_return is not None, preset.env_id
        Config(env_id=preset.env_id, **{k: config_module.coerce(k, v) for k, v in values.items()}).validate()


def test_fields_with_choices_allow_exactly_them():
    choice_fields = [f for f in dataclasses.fields(Config) if "choices" in f.metadata]
    assert {f.name for f in choice_fields} == {
        "optimizer",
        "lr_schedule",
        "activation",  # model: mlp, cnn or a reference to the user's network (tests/algo/test_user_model.py)
        "gaussian_std",
        "squash",
        "backend",
        "track",
        "sync_combine",
    }
    for f in choice_fields:
        assert f.default in f.metadata["choices"], f.name
        for value in f.metadata["choices"]:
            Config(env_id="x", max_steps=1000, **{f.name: value}).validate()
        with pytest.raises(
            BadInput,
            match=f"^{f.name}: 'nope' is not allowed; expected " + " or ".join(f.metadata["choices"]) + "$",
        ):
            Config(env_id="x", **{f.name: "nope"}).validate()


def test_field_type_drops_none():
    assert config_module.field_type("max_steps") is int and config_module.field_type("ray_address") is str
    assert config_module.field_type("tensorboard") is bool and config_module.field_type("lr") is float


def test_cnn_refuses_obs_norm_and_a_state_dependent_std():
    image = _info((1, 84, 84), False)
    with pytest.raises(BadInput, match="obs_norm: true is not allowed with model cnn"):
        resolve_config(image, {}, {"obs_norm": True})
    with pytest.raises(BadInput, match="gaussian_std: 'state' is not allowed with model cnn"):
        resolve_config(image, {}, {"gaussian_std": "state"})


def test_a_linear_lr_schedule_needs_max_steps_or_max_seconds_on_either_backend():
    for backend in ("local", "ray"):  # on ray, the push carries the rate the worker's schedule chose
        Config(env_id="x", lr_schedule="linear", max_steps=10, backend=backend).validate()
        Config(env_id="x", lr_schedule="linear", max_seconds=60.0, backend=backend).validate()
        Config(env_id="x", lr_schedule="linear", max_steps=10, max_seconds=60.0, backend=backend).validate()
        with pytest.raises(BadInput, match="^lr_schedule: 'linear' needs .*--max-steps or --max-seconds"):
            Config(env_id="x", lr_schedule="linear", backend=backend).validate()


IMAGE = EnvInfo("ALE/Fake-v5", Spaces((1, 84, 84), 6), 18.0, None)


def test_a_cnn_without_an_lstm_gets_four_stacked_frames_unless_told():
    assert resolve_config(IMAGE, {}, {}).frame_stack == 1  # the derived Atari agent has an LSTM
    assert resolve_config(IMAGE, {}, {"lstm_size": 0}).frame_stack == 4
    assert resolve_config(IMAGE, {}, {"lstm_size": 0, "frame_stack": 2}).frame_stack == 2
    assert resolve_config(IMAGE, {}, {"frame_stack": 4}).frame_stack == 4  # LSTM and a stack: allowed


def test_frame_stack_is_refused_where_it_cannot_work(cartpole):
    with pytest.raises(BadInput, match="^frame_stack: 1 is not allowed with model cnn and lstm_size 0"):
        resolve_config(IMAGE, {}, {"lstm_size": 0, "frame_stack": 1})
    with pytest.raises(
        BadInput, match=r"^frame_stack: 4 is not allowed for CartPole-v1 \(frames are stacked"
    ):
        resolve_config(cartpole, {}, {"frame_stack": 4})
    for bad in (0, 5):
        with pytest.raises(
            BadInput, match=rf"^frame_stack: {bad} is not allowed; expected an integer in \[1, 4\]"
        ):
            resolve_config(IMAGE, {}, {"frame_stack": bad})


def test_a_users_image_env_keeps_a_feed_forward_cnn_on_its_own_frames():
    user = EnvInfo("mypkg.envs:Pixels-v0", Spaces((3, 64, 64), 4), None, None)
    config = resolve_config(user, {}, {"model": "cnn", "lstm_size": 0})
    assert config.frame_stack == 1

"""``a3c train --config FILE.toml`` and ``--env-kwarg``: where their values stand among the others
(defaults → env-derived → preset → file → options → --set), and the one line a bad file gets."""

from __future__ import annotations

import pytest

from a3c.core.errors import BadInput
from a3c.training.options import train_setup
from a3c_envs import EnvSetupError, load_preset
from tests.support.commands import call_a3c


def setup(
    tmp_path, text: str | None, options: dict | None = None, sets: tuple[str, ...] = (), env="CartPole-v1"
):
    """``train_setup`` of a fresh run with a --config file holding ``text`` (None: no file)."""
    path = None
    if text is not None:
        path = tmp_path / "my.toml"
        path.write_text(text)
    given = {"config_file": path, **(options or {})}
    return train_setup(env, given, sets, run_dir=tmp_path / "run", force=False, resume=None, serial=False)


def test_the_file_is_over_the_preset_and_under_options_and_set(tmp_path):
    preset = load_preset("CartPole-v1")
    text = "t_max = 7\nlr = 0.002\nentropy_coef = 0.02\n"
    config = setup(tmp_path, text).config
    assert (config.t_max, config.lr, config.entropy_coef) == (7, 0.002, 0.02)
    assert config.envs_per_worker == preset["envs_per_worker"]  # what the file does not say: the preset's
    config = setup(tmp_path, text, {"seed": 3, "t_max": 9}, ("lr=0.003",)).config
    assert (config.t_max, config.lr, config.entropy_coef, config.seed) == (9, 0.003, 0.02, 3)


def test_the_file_may_name_the_env_but_not_another_than_env(tmp_path):
    assert setup(tmp_path, 'env_id = "Acrobot-v1"\n', env=None).config.env_id == "Acrobot-v1"
    with pytest.raises(
        BadInput, match="^--env: 'CartPole-v1' does not match env_id 'Acrobot-v1' of --config"
    ):
        setup(tmp_path, 'env_id = "Acrobot-v1"\n')


def test_env_kwargs_merge_key_by_key(tmp_path):
    text = "[env_kwargs]\ng = 9.0\n"
    made = setup(
        tmp_path, text, {"env_kwargs": {"max_episode_steps": 100}}, ("env_kwargs=g=5.0",), "Pendulum-v1"
    )
    assert made.config.env_kwargs == {"g": 5.0, "max_episode_steps": 100}
    with pytest.raises(EnvSetupError, match=r"^env_kwargs: .* is not allowed for Pendulum-v1 .*length"):
        setup(tmp_path, text + "length = 1\n", env="Pendulum-v1")  # not an argument of Pendulum's


def test_an_env_kwarg_that_changes_the_spaces_leaves_the_discrete_preset_out(tmp_path):
    plain = setup(tmp_path, None, env="CartPole-v1")
    assert not plain.skipped_preset
    require_box2d()
    made = setup(tmp_path, None, {"env_kwargs": {"continuous": True}}, env="LunarLander-v3")
    assert (
        made.skipped_preset and made.info.spaces.continuous and made.config.env_kwargs == {"continuous": True}
    )
    # Derived for flat Box actions (a tanh squash and its small bonus); the discrete preset says 0.01.
    assert (made.config.squash, made.config.entropy_coef) == ("tanh", 1e-3)


def require_box2d():
    from tests.support.extras import require_extra

    require_extra("Box2D", "box2d")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "--config: '{path}' does not exist; expected a TOML file"),
        ("lr = ", "--config: '{path}' is not valid TOML"),
        ("learning_rate = 0.1\n", "--config '{path}': unknown key 'learning_rate'; allowed:"),
        ("lr = -1\n", "lr: -1.0 is not allowed; expected a finite number > 0"),
        ("[env_kwargs]\nseed = 1\n", "env_kwargs: {{'seed': 1}} is not allowed"),
    ],
)
def test_a_bad_file_is_one_error_line_and_exit_2_with_nothing_created(tmp_path, text, message):
    path = tmp_path / "my.toml"
    if text is not None:
        path.write_text(text)
    result = call_a3c(
        "train", "--env", "CartPole-v1", "--config", str(path), "--run-dir", str(tmp_path / "run")
    )
    assert result.returncode == 2, result
    assert result.stderr.startswith("error: " + message.format(path=path)), result.stderr
    assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_bad_env_kwarg_is_one_error_line(tmp_path):
    for item, message in [
        ("foo=1", "env_kwargs: {'foo': 1} is not allowed for CartPole-v1"),
        ("x", "--env-kwarg:"),
    ]:
        result = call_a3c(
            "train", "--env", "CartPole-v1", "--env-kwarg", item, "--run-dir", str(tmp_path / "r")
        )
        assert result.returncode == 2 and result.stderr.startswith("error: " + message), result.stderr
        assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "r").exists()


@pytest.mark.slow  # trains (in this process)
def test_on_a_resume_the_file_stands_over_the_saved_config_and_under_the_options(tmp_path):
    from tests.support.commands import train_serial_fixed_length

    run = tmp_path / "resumed"
    train_serial_fixed_length(run, 400)
    path = tmp_path / "my.toml"
    path.write_text("t_max = 7\nlr = 0.002\n")

    def resumed(options: dict, sets: tuple[str, ...] = ()):
        given = {"config_file": path, **options}
        return train_setup(None, given, sets, run_dir=None, force=False, resume=run, serial=True).config

    assert (resumed({}).t_max, resumed({}).lr) == (7, 0.002)
    config = resumed({"t_max": 9}, ("lr=0.003",))
    assert (config.t_max, config.lr) == (9, 0.003)  # options and --set win over the file
    path.write_text('env_id = "CartPole-v1"\n')
    with pytest.raises(
        BadInput, match="^--config: env_id 'CartPole-v1' does not match the resumed run's env"
    ):
        resumed({})


def test_wrappers_from_the_file_options_and_set_and_the_guard_on_the_files(tmp_path, monkeypatch):
    doubled, evil = "tests.support.envs:Doubled", "evil_wrappers:Evil"
    setup_of = setup(tmp_path, f'wrappers = ["{doubled}"]\n')
    assert setup_of.config.wrappers == (doubled,) and setup_of.info.spaces.obs_shape == (4,)
    assert load_preset("CartPole-v1") is not None and setup_of.skipped_preset is False  # same spaces
    assert setup(tmp_path, None, {"wrappers": (doubled, doubled)}).config.wrappers == (doubled, doubled)
    assert setup(tmp_path, None, sets=(f"wrappers={doubled},{doubled}",)).config.wrappers == (doubled,) * 2
    (tmp_path / "evil_wrappers.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [str(tmp_path), *__import__("sys").path[1:]])
    with pytest.raises(EnvSetupError, match=r"^--config '.*': its wrapper 'evil_wrappers:Evil' would import"):
        setup(tmp_path, f'wrappers = ["{evil}"]\n')

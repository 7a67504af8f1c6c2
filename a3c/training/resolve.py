"""Resolve a run's config: built-in defaults → derived from the env → the env's preset → a ``--config``
file → options → ``--set``. It needs the env (``a3c_envs``), so it sits in
``a3c.training``, above every layer it reads."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from a3c.core.config import Config, coerce, known_keys, too_deep
from a3c.core.errors import BadInput
from a3c_envs import EnvInfo, load_preset
from a3c_envs.atari import is_atari

FEED_FORWARD_STACK = 4  # frames a cnn without an LSTM sees (Mnih et al. 2016, A3C FF; DQN)
# Confirmation: gymnasium's reward thresholds are means over 100 consecutive episodes, so an evaluation at the
# target is confirmed on up to 100 more; long episodes get fewer (at most ~100k greedy steps), never under 30
# (the lower confidence bound of a mean over fewer is too wide to confirm a solve near the target).
CONFIRM_EPISODES = (30, 100)
CONFIRM_STEPS = 100_000
# Images: the A3C paper's conv net + LSTM(256), t_max 20 and lr 1e-4, with what Pong taught (Adam's eps 1e-5:
# smaller first steps kept its ReLUs alive; 8 envs per worker: batched conv forwards) and a clip of 0.5 that
# binds on our mean losses (the paper's 40 was for summed ones and never binds here; 0.5 led 40 on Breakout's
# two seeds: docs/log/dev-notes.md, "Gradient norms on images").
IMAGE_DEFAULTS: dict[str, Any] = {
    "model": "cnn",
    "lstm_size": 256,
    "t_max": 20,
    "lr": 1e-4,
    "optimizer_eps": 1e-5,
    "envs_per_worker": 8,
    "max_grad_norm": 0.5,
    "eval_interval": 30.0,
}
TANH_ENTROPY_COEF = 1e-3  # Box actions squashed by tanh, unless told otherwise
BOX_GAMMA = (0.98, 0.99)  # the discounts screened for Box actions; box_gamma stays between them


def confirm_episodes(max_episode_steps: int | None) -> int:
    """Confirmation episodes for an env whose episodes last at most ``max_episode_steps`` (None: unknown)."""
    low, high = CONFIRM_EPISODES
    return low if not max_episode_steps else max(low, min(high, CONFIRM_STEPS // max_episode_steps))


def box_gamma(max_episode_steps: int | None) -> float:
    """The discount for Box actions on flat observations, whose episodes last at most ``max_episode_steps``
    (None: unknown): a horizon of a quarter of the limit, within ``BOX_GAMMA``."""
    low, high = BOX_GAMMA
    return high if not max_episode_steps else round(max(low, min(high, 1 - 4 / max_episode_steps)), 6)


def env_defaults(info: EnvInfo) -> dict[str, Any]:
    """Defaults derived from the env itself, under any preset: the target from its spec's reward_threshold;
    for image observations the A3C paper's Atari setup (conv net + LSTM(256), t_max 20, lr 1e-4) with a
    gradient clip of 0.5; for Box actions a Gaussian policy without an entropy bonus, and when flat one
    squashed by tanh (with its small bonus, below) on normalised observations, Adam 1e-3, 16 envs per
    worker and a discount sized to the episode limit; for flat observations rewards scaled by the running
    std of the discounted return. (The confirmation of a target, whoever set it, is derived in
    ``resolve_config``.)"""
    values: dict[str, Any] = {"target_return": info.reward_threshold}
    if not info.spaces.image or not is_atari(info.env_id):
        # Unscaled returns (Acrobot's -1 per step: values near -100) give the critic errors in the tens, and
        # the policy gradient noise of that size drove Acrobot's policy to uniform (entropy 0.01) or to a
        # single action (entropy 0) in every run; scaled, 3 of 3 seeds solved in 2-8 s. Atari's training
        # envs clip rewards to their sign instead (the A3C paper's protocol); other image envs are scaled.
        values["reward_scale"] = True
    if info.spaces.image:
        values.update(IMAGE_DEFAULTS)
    if info.spaces.continuous and not info.spaces.image:
        # A tanh squash, Adam 1e-3 and 16 envs per worker: chosen on five Box envs side by side, against the
        # clipped Gaussian at 3e-4 and 4 envs, which took Pendulum past 60 s under the confidence-bound stop
        # rule (docs/results.md, "Box actions: the bounded Gaussian").
        # A dimension with no width (low == high) has no tanh to invert: its actions stay clipped.
        spans = zip(info.spaces.action_low, info.spaces.action_high, strict=True)
        squash = "tanh" if all(high > low for low, high in spans) else "clip"
        values.update(obs_norm=True, envs_per_worker=16, t_max=8, gae_lambda=0.95, lr=1e-3, squash=squash)
        # A short horizon for short episodes, fit to the two limits screened: γ 0.98 solved Pendulum (200
        # steps) fastest, but on the 1000-step envs it did not hold (Hopper lower, MountainCarContinuous
        # stuck on one seed): dev-notes, "Derived defaults".
        values["gamma"] = box_gamma(info.max_episode_steps)
    if info.spaces.continuous:
        # No entropy bonus for a learned σ (SB3's default too; a tanh squash gets a small one in
        # resolve_config): 0.01 pushed HalfCheetah's and Pendulum's log σ to its cap of 2 in every
        # dimension, training on clipped noise (HalfCheetah 828 vs SB3's 906 after 200 s). Discrete
        # policies keep 0.01, with which the discrete half of the suite won.
        values["entropy_coef"] = 0.0
    return values


def check_fits(config: Config, info: EnvInfo) -> Config:
    """Raise BadInput when the config's model cannot take the env's observations; return config."""
    if config.model == "cnn" and not info.spaces.image:
        raise BadInput(
            f"model: 'cnn' is not allowed for {info.env_id}'s observations of shape "
            f"{info.spaces.obs_shape}; expected mlp (cnn needs images [C, H, W])"
        )
    if config.model == "mlp" and info.spaces.image:
        raise BadInput(
            f"model: 'mlp' is not allowed for {info.env_id}'s image observations "
            f"{info.spaces.obs_shape}; expected cnn"
        )
    if config.model == "mlp" and config.lstm_size:
        raise BadInput(f"lstm_size: {config.lstm_size} is not allowed with model mlp; expected 0")
    if config.model == "cnn" and config.obs_norm:
        raise BadInput(
            "obs_norm: true is not allowed with model cnn (pixels are scaled to [0, 1]); expected false"
        )
    if config.frame_stack > 1 and not is_atari(info.env_id):
        raise BadInput(
            f"frame_stack: {config.frame_stack} is not allowed for {info.env_id} (frames are stacked for "
            "ALE/ ids only); expected 1"
        )
    # Atari only: the frames are ours to stack there (a user's image env may stack its own).
    if config.model == "cnn" and not config.lstm_size and config.frame_stack < 2 and is_atari(info.env_id):
        raise BadInput(
            f"frame_stack: {config.frame_stack} is not allowed with model cnn and lstm_size 0 (one frame "
            f"shows no motion, and nothing else remembers); expected >= 2 (e.g. {FEED_FORWARD_STACK}), or "
            "an lstm_size"
        )
    if config.model == "cnn" and config.gaussian_std == "state":
        raise BadInput("gaussian_std: 'state' is not allowed with model cnn; expected learned")
    return config


def read_config_file(path: Path) -> dict[str, Any]:
    """The typed values of a TOML config file (``--config``; the preset format, ``env_id`` allowed), or
    BadInput naming the file and what is wrong with it."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise BadInput(f"--config: {str(path)!r} does not exist; expected a TOML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--config: {str(path)!r} cannot be read ({exc}); expected a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"--config: {str(path)!r} is not valid TOML ({exc})") from None
    except RecursionError:  # nested past what the TOML reader recurses through
        raise too_deep(f"--config {str(path)!r}", None) from None
    return {k: coerce(k, v) for k, v in known_keys(data, f"--config {str(path)!r}").items()}


def layer(chosen: dict[str, Any], values: dict[str, Any]) -> None:
    """Put ``values`` over ``chosen``: a value replaces the one below it, ``env_kwargs`` key by key."""
    for key, value in values.items():
        if key == "env_kwargs" and value is not None:
            value = {**chosen.get(key, {}), **value}
        chosen[key] = value


def resolve_config(
    info: EnvInfo,
    options: dict[str, Any],
    overrides: dict[str, Any],
    use_preset: bool = True,
    from_file: dict[str, Any] | None = None,
) -> Config:
    """Build and validate the config of a run.

    Args:
        info: the inspected env.
        options: command-line options that were given (None values mean "not given").
        overrides: typed ``--set`` values; they win over everything.
        use_preset: False: the env's preset is ignored (``--no-preset``), as for an env without one.
        from_file: typed values of a ``--config`` file: over the preset, under the options.
    """
    values: dict[str, Any] = {"env_id": info.env_id, **env_defaults(info)}
    preset = (load_preset(info.env_id) if use_preset else None) or {}
    chosen = {k: coerce(k, v) for k, v in known_keys(preset, f"preset of {info.env_id}").items()}
    layer(chosen, {k: v for k, v in (from_file or {}).items() if k != "env_id"})
    layer(chosen, {k: v for k, v in options.items() if v is not None})
    layer(chosen, overrides)
    values.update(chosen)
    feed_forward = values.get("model") == "cnn" and not values.get("lstm_size")
    if "frame_stack" not in chosen and feed_forward and is_atari(info.env_id):
        values["frame_stack"] = FEED_FORWARD_STACK  # the A3C paper's feed-forward agent sees 4 frames
    if "entropy_coef" not in chosen and values.get("squash") == "tanh" and info.spaces.continuous:
        # Faster with it on Pendulum's preset of 2026-12-03 (docs/configuration.md); the L2 pull on the mean
        # (mean_l2_coef), not this bonus, keeps the mean out of tanh's flat tails.
        values["entropy_coef"] = TANH_ENTROPY_COEF
    if "confirm_episodes" not in chosen and values.get("target_return") is not None:
        # Any target, the spec's or the user's: a lucky evaluation must not end the run.
        values["confirm_episodes"] = confirm_episodes(info.max_episode_steps)
    return check_fits(Config(**values).validate(), info)

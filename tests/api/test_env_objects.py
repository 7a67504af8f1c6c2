"""``a3c.train`` on an env class and wrappers passed as Python objects: the config names them by reference,
the run dir by the class, every env of the run (learner, evaluator, ``a3c.load``) is wrapped, and what the
Ray backend cannot ship is refused before the run dir exists."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import a3c
from a3c.api.policy import load_run_code
from a3c.rundir.files import default_run_dir
from a3c_envs.user_envs import run_name


class Coin(gym.Env):
    """Observes a coin in {-1, 1}; reward 1 for naming it (action 1 for 1), episodes of 10 steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.coin = 0, self.np_random.choice([-1.0, 1.0])
        return np.array([self.coin], np.float32), {}

    def step(self, action):
        reward = float(int(action) == int(self.coin > 0))
        self.t, self.coin = self.t + 1, self.np_random.choice([-1.0, 1.0])
        return np.array([self.coin], np.float32), reward, False, self.t >= 10, {}


class Flipped(gym.ObservationWrapper):
    """The coin seen upside down, and counted: ``made`` is how many envs this process wrapped."""

    made = 0

    def __init__(self, env):
        super().__init__(env)
        Flipped.made += 1

    def observation(self, observation):
        return -observation


@pytest.mark.slow
def test_a_serial_run_on_an_env_class_with_a_wrapper(tmp_path):
    Flipped.made = 0
    run = a3c.train(Coin, wrappers=[Flipped], serial=True, run_dir=tmp_path / "run", max_steps=1000,
                    eval_interval_steps=500, seed=0)  # fmt: skip
    assert run.exit_code == 0
    module = __name__
    assert run.config["env_id"] == f"{module}:Coin" and run.config["wrappers"] == [f"{module}:Flipped"]
    # 1 inspect_env, 1 learner env, 1 evaluator vector env of eval_episodes envs
    assert Flipped.made == 2 + run.config["eval_episodes"]
    policy = a3c.load(run.run_dir)  # its spaces checked on one env made as the run made them
    env = policy.make_env()
    assert isinstance(env.unwrapped, Coin) and Flipped.made == 4 + run.config["eval_episodes"]
    assert policy.predict(env.reset(seed=0)[0]).shape == ()
    assert run_name(run.config["env_id"]) == "Coin"
    assert default_run_dir(run_name(run.config["env_id"]), 0).parent.name == "Coin"


def test_the_ray_backend_refuses_objects_it_cannot_import(tmp_path):
    class Local(Coin):  # a class in a function: no other process can import it by name
        pass

    match = r"^--backend: ray is not allowed with .*Local \(defined in a script or notebook"
    with pytest.raises(a3c.BadInput, match=match):
        a3c.train(Local, wrappers=[Flipped], backend="ray", run_dir=tmp_path / "run", max_steps=100)
    assert not (tmp_path / "run").exists()


def test_an_object_that_cannot_be_pickled_is_refused_before_the_run_dir(tmp_path):
    lock = threading.Lock()

    def locked(env):  # holds a lock: no process can be sent it, no run dir can keep it
        with lock:
            return env

    match = r"^wrappers: '.*locked' cannot be sent to the worker processes \(TypeError: cannot pickle"
    with pytest.raises(a3c.BadInput, match=match):
        a3c.train("CartPole-v1", wrappers=[locked], serial=True, run_dir=tmp_path / "run", max_steps=100)
    assert not (tmp_path / "run").exists()


class RunsOnUnpickling:
    """A pickle whose loading writes ``path``: what a planted user_code.pkl could do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (Path.write_text, (Path(self.path), "ran"))


def test_trust_code_unpickles_only_a_run_dirs_user_code_and_a_damaged_one_is_one_line(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    (tmp_path / "user_code.pkl").write_bytes(pickle.dumps(RunsOnUnpickling(marker)))
    monkeypatch.chdir(tmp_path)
    load_run_code(Path("sub") / "model.pt")  # a checkpoint outside a run's checkpoints/: not ./user_code.pkl
    load_run_code(tmp_path)  # no config.json: no run dir
    assert not marker.exists()
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "user_code.pkl").write_bytes(b"not a pickle")
    with pytest.raises(a3c.BadInput, match=r"^trust_code: '.*user_code.pkl' cannot be unpickled \("):
        load_run_code(tmp_path)

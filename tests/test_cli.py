"""The command line: help, and every kind of bad input → one ``error:`` line naming the field, exit 2."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import click
import pytest
import torch
from click.testing import CliRunner

from a3c.cli import cli
from a3c.core.config import Config
from a3c.rundir.files import default_run_dir
from a3c.training.options import config_options, option_fields
from tests.support import ROOT
from tests.support.commands import a3c_env, a3c_exit_code, call_a3c, run_a3c

call = a3c_exit_code  # what the tests of this folder and others import by this name


def bad(capsys, *args: str) -> str:
    code = call(*args)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--env", "CartPol-v1"], ["--env", "'CartPol-v1'", "CartPole-v1"]),
        (["--env", "tests.support.space_envs:TextObs-v0"], ["not supported yet", "Text("]),
        (["--env", "CartPole-v1", "--workers", "0"], ["workers", "0", "[1, 1024]"]),
        (["--env", "CartPole-v1", "--set", "lr=0"], ["lr", "0", "> 0"]),
        (["--env", "CartPole-v1", "--set", "lr=-1e-3"], ["lr", "-0.001"]),
        (["--env", "CartPole-v1", "--set", "gamma=1.5"], ["gamma", "1.5", "(0, 1]"]),
        (["--env", "CartPole-v1", "--set", "gamma=0"], ["gamma", "0"]),
        (["--env", "CartPole-v1", "--set", "t_max=0"], ["t_max", "0", ">= 1"]),
        (["--env", "CartPole-v1", "--set", "learning_rate=1"], ["unknown key", "'learning_rate'", "lr"]),
        (["--env", "CartPole-v1", "--set", "t_max=abc"], ["t_max", "'abc'", "integer"]),
        (["--env", "CartPole-v1", "--set", "lr"], ["--set", "key=value"]),
        (["--env", "CartPole-v1", "--workers", "abc"], ["--workers", "abc"]),
        (["--env", "CartPole-v1", "--workers", "2", "--serial"], ["--workers", "--serial"]),
        (["--env", "CartPole-v1", "--seed", "-1"], ["seed", "-1"]),
        (["--env", "CartPole-v1", "--eval-interval", "inf"], ["eval_interval", "inf", "finite"]),
        (["--env", "CartPole-v1", "--target-return", "nan"], ["target_return", "nan", "finite"]),
        (["--env", "a:b:c"], ["--env", "'a:b:c'"]),
    ],
)
def test_bad_train_input_is_one_line_and_exit_2(capsys, tmp_path, args, expected):
    run_dir = tmp_path / "run"
    line = bad(capsys, "train", *args, "--run-dir", str(run_dir))
    for part in expected:
        assert part in line, line
    assert not run_dir.exists()  # validated before anything is created


def test_existing_run_dir_is_refused_and_kept(capsys, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text("{}")
    line = bad(capsys, "train", "--env", "CartPole-v1", "--run-dir", str(run_dir))
    assert "--run-dir" in line and "--force" in line
    assert (run_dir / "config.json").read_text() == "{}"


def test_force_does_not_replace_a_directory_that_is_not_a_run(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("keep me")
    line = bad(capsys, "train", "--env", "CartPole-v1", "--run-dir", str(tmp_path), "--force")
    assert "not an a3c run directory" in line
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_force_does_not_replace_a_project_that_has_a_config_json(capsys, tmp_path):
    # An a3c-looking config.json next to other files: still not a run, so --force must not delete it.
    (tmp_path / "config.json").write_text('{"env_id": "CartPole-v1", "versions": {"a3c": "0.1.0"}}')
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "important.py").write_text("keep me")
    line = bad(capsys, "train", "--env", "CartPole-v1", "--run-dir", str(tmp_path), "--force")
    assert "not an a3c run directory" in line
    assert (tmp_path / "src" / "important.py").read_text() == "keep me"


def test_run_dir_below_a_file_is_bad_input(capsys, tmp_path):
    (tmp_path / "file").write_text("x")
    line = bad(capsys, "train", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "file" / "run"))
    assert "--run-dir" in line and "cannot be created" in line


def test_evaluate_missing_checkpoint(capsys, tmp_path):
    line = bad(capsys, "evaluate", str(tmp_path / "nope.pt"))
    assert "does not exist" in line


def test_evaluate_corrupt_checkpoint(capsys, tmp_path):
    path = tmp_path / "broken.pt"
    path.write_bytes(b"this is not a checkpoint")
    line = bad(capsys, "evaluate", str(path))
    assert "cannot be read" in line and "broken.pt" in line


def test_evaluate_foreign_checkpoint(capsys, tmp_path):
    path = tmp_path / "foreign.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, path)
    line = bad(capsys, "evaluate", str(path))
    assert "not an a3c checkpoint" in line


def offset_obs_checkpoint(path, obs_norm: dict | None, config_obs_norm: bool = True) -> None:
    """A hand-made checkpoint for OffsetObs-v0 (tests/support/envs.py) whose policy plays perfectly only on
    observations normalised by the env's true statistics: action 1 exactly when normalised obs[0] > 0."""
    from a3c.algo.learner import build_model
    from a3c.core.spaces import Spaces
    from a3c.rundir.checkpoints import save_checkpoint

    config = Config(env_id="tests.support.envs:OffsetObs-v0", hidden_sizes=(4,), obs_norm=config_obs_norm)
    spaces = Spaces((3,), 2)
    model = build_model(config.validate(), spaces)
    with torch.no_grad():
        for param in model.parameters():
            param.zero_()
        model.policy_body[0].weight[0, 0] = 1.0  # hidden 0 = tanh(normalised obs[0])
        model.policy_head.weight[1, 0] = 10.0  # logit of action 1 = 10 · hidden 0
    payload = {"config": config.to_dict(), "spaces": spaces.to_dict(), "model_state": model.state_dict()}
    if obs_norm is not None:
        payload["obs_norm"] = obs_norm
    save_checkpoint(path, payload)


def test_evaluate_uses_the_saved_observation_statistics(capsys, tmp_path):
    from tests.support.envs import OffsetObsEnv

    def evaluated(obs_norm: dict | None, config_obs_norm: bool = True) -> tuple[int, dict | str]:
        path = tmp_path / "checkpoint.pt"
        offset_obs_checkpoint(path, obs_norm, config_obs_norm)
        code = call("evaluate", str(path), "--episodes", "20", "--json")
        out, err = capsys.readouterr()
        return code, (json.loads(out) if code == 0 else err)

    def stats(mean, std) -> dict:
        mean, var = torch.as_tensor(mean, dtype=torch.float64), torch.as_tensor(std, dtype=torch.float64) ** 2
        return {"mean": mean, "var": var, "count": torch.tensor(1e6, dtype=torch.float64)}

    true = stats(OffsetObsEnv.OFFSET, OffsetObsEnv.SCALE)
    code, result = evaluated(true)
    assert code == 0 and result["mean_return"] == 10.0, result  # every step right: the stats were applied
    code, result = evaluated(stats([0.0] * 3, [1.0] * 3))  # replaced by the prior: always action 1
    assert code == 0 and result["mean_return"] < 8.0, result
    code, result = evaluated(true, config_obs_norm=False)  # a run without obs_norm: raw observations
    assert code == 0 and result["mean_return"] < 8.0, result
    code, result = evaluated(None)  # removed: refused, not played on raw observations
    assert code == 2 and "obs_norm" in result, result


def test_evaluate_run_dir_without_checkpoints(capsys, tmp_path):
    line = bad(capsys, "evaluate", str(tmp_path))
    assert "no checkpoints/best.pt" in line


# Train options with no default value: inputs (--env, --resume, --set), and options whose absence means
# something the help says in words (the value of --run-dir is checked against default_run_dir below).
NO_DEFAULT = {"env_id": "", "resume": "", "overrides": "", "ray_address": "none starts one", "run_dir": ""}
NO_DEFAULT |= {"config_file": "", "env_kwargs": ""}  # --config FILE.toml, --env-kwarg KEY=VALUE
NO_DEFAULT["seeds_text"] = "instead of --seed"  # a3c train --seeds LIST: one run per seed
# Config fields whose default is None: what that means, as the help must say it.
NONE_MEANS = {"max_steps": "no limit", "max_seconds": "no limit", "target_return": "reward_threshold"}
NONE_MEANS["video"] = "no videos"  # a3c evaluate --video DIR
NONE_MEANS["group_by"] = "one per env and config"  # a3c plot --group-by KEY
NONE_MEANS["reach"] = "no such columns"  # a3c runs --reach LEVELS
NONE_MEANS |= {"storage": "study.db", "study_dir": "runs/tune/<env-id>", "space_items": "docs/tune.md"}
NONE_MEANS["fmt"] = "onnx"  # a3c export --format: from the output's suffix, else onnx
NONE_MEANS |= {"seeds": "5; races: 3", "peer": "zoo; default with --suite", "env_ids": "CartPole bench"}
NONE_MEANS["backends_env"] = "none"  # a3c bench --backends ENV: off unless given
NONE_MEANS["commit"] = "git's"  # a3c bench --gpu --commit: where the tree has no git


def shown_default(help_text: str) -> str | None:
    """The ``[default: ...]`` of an option's help; "the env's preset, else 2" → "2" (the built-in value)."""
    found = re.search(r"\[default: ([^\]]*)\]", help_text)
    return None if found is None else found.group(1).rsplit("else ", 1)[-1]


def same_value(shown: str, value: object) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(shown) == float(value)
        except ValueError:
            return False
    if value == ():  # a repeatable option given no times (--wrapper)
        return shown == "none"
    return shown == str(value)


def test_an_option_the_env_can_derive_says_so_in_its_help():
    from a3c.core.spaces import Spaces
    from a3c.training.resolve import env_defaults
    from a3c_envs import EnvInfo

    image = EnvInfo("Image-v0", Spaces((1, 84, 84), 4, False, (), ()), None, None)
    box = EnvInfo("Box-v0", Spaces((5,), 1, True, (-1.0,), (1.0,)), None, 200)
    derived = set(env_defaults(image)) | set(env_defaults(box))
    train = cli.commands["train"]
    ctx = click.Context(train, info_name="train", show_default=True)
    helps = {p.name: p.get_help_record(ctx)[1] for p in train.params if isinstance(p, click.Option)}
    described = {"target_return": "reward_threshold", "model": "cnn for images"}  # their own words
    for name in derived & set(helps):
        assert described.get(name, "derived from its spaces") in helps[name], (name, helps[name])
    assert {name for name, text in helps.items() if "derived from its spaces" in text} <= derived
    assert {"envs_per_worker", "eval_interval"} <= derived & set(helps)


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_help_documents_every_option_with_its_default(command):
    # Each option's shown default is its real one: Config's field default for a train option (click's
    # default there is None, so that presets can fill it), else the click parameter's default.
    cmd = cli.commands[command]
    ctx = click.Context(cmd, info_name=command, show_default=True)
    config_defaults = {f.name: f.default for f in dataclasses.fields(Config)}
    checked = set()
    for param in cmd.params:
        if not isinstance(param, click.Option) or param.is_flag or param.required:
            continue  # flags are off unless given; a required option has no default
        option, text = param.get_help_record(ctx)
        shown = shown_default(text)
        if command == "train" and param.name in NO_DEFAULT:
            assert NO_DEFAULT[param.name] in text, (option, text)
            if param.name == "run_dir":  # the template must describe what default_run_dir makes
                pattern = re.escape(shown).replace(re.escape("<env-id>"), "ENV")
                pattern = pattern.replace(re.escape("<YYYYmmdd-HHMMSS>"), r"\d{8}-\d{6}")
                assert re.fullmatch(pattern.replace(re.escape("<seed>"), "7"), str(default_run_dir("ENV", 7)))
            checked.add(param.name)
            continue
        real = config_defaults[param.name] if command == "train" else param.default
        if real is None:
            assert NONE_MEANS[param.name] in (shown or ""), (option, text)
        elif shown is None:  # a choice may mark its default in its own description instead
            assert isinstance(param.type, click.Choice), (option, text)
            assert re.search(rf"\b{re.escape(str(real))}:[^;]*\(default\)", text), (option, real, text)
        else:
            assert same_value(shown, real), f"{option}: the help shows {shown!r}, the default is {real!r}"
        checked.add(param.name)
    if command == "train":  # the options the old version of this test named are all among them
        assert checked >= {"env_id", "workers", "envs_per_worker", "seed", "run_dir", "max_steps",
                           "max_seconds", "target_return", "eval_interval", "eval_episodes",
                           "overrides"}  # fmt: skip


def words(text: str) -> str:
    return " ".join(text.split())


def test_every_config_field_with_an_option_is_a_train_option_with_the_fields_help():
    # The options are generated: flag, help and default come from the field, and no option repeats them.
    train = cli.commands["train"]
    ctx = click.Context(train, info_name="train", show_default=True)
    params = {p.name: p for p in train.params if isinstance(p, click.Option)}
    shown = words(CliRunner().invoke(cli, ["train", "--help"]).output)
    option_names = {f.name for f in option_fields()}
    assert option_names >= {"workers", "seed", "max_steps", "target_return", "backend", "ray_address"}
    hand_written = {"env_id", "env_kwargs"}  # --env, and the repeatable --env-kwarg KEY=VALUE
    assert option_names == set(params).intersection(f.name for f in dataclasses.fields(Config)) - hand_written
    for f in option_fields():
        param = params[f.name]
        assert param.opts == [f.metadata["option"]] and (param.multiple or param.default is None), f.name
        # None: not given (a repeatable option given no times reads (), which its callback makes None)
        assert param.process_value(ctx, () if param.multiple else param.default) is None, f.name
        help_text = words(param.get_help_record(ctx)[1])
        field_help = f.metadata["help"]
        assert help_text.startswith(field_help[:1].upper() + field_help[1:] + "."), (f.name, help_text)
        assert f" {f.metadata['option']} " in shown and words(field_help[1:]) in shown, f.name


def test_a_field_given_an_option_gets_one():
    @dataclasses.dataclass(frozen=True)
    class Extended(Config):
        new_knob: int = dataclasses.field(
            default=7, metadata={"help": "a knob no one has yet", "option": "--new-knob"}
        )
        new_flag: bool = dataclasses.field(
            default=False, metadata={"help": "a new switch", "option": "--new-flag"}
        )

    seen: dict = {}

    @click.command(context_settings={"show_default": True})
    @config_options("seed", rest=True, config=Extended)  # rest: every option field not placed below
    @click.option("--other", default="x", help="Not a field.")
    @config_options("workers", "backend", config=Extended)
    def command(other: str, **options) -> None:
        seen.clear()
        seen.update(options)

    names = [p.name for p in command.params]
    assert {"new_knob", "new_flag"} <= set(names), names
    assert names[0] == "seed" and names[-3:] == ["other", "workers", "backend"]
    assert names.index("new_knob") < names.index("new_flag") < names.index("other")
    assert sorted(names) == sorted([f.name for f in option_fields(Extended)] + ["other"])  # each once
    output = words(CliRunner().invoke(command, ["--help"]).output)
    assert "--new-knob INTEGER A knob no one has yet. [default: 7]" in output, output
    assert "--new-flag A new switch." in output and "[default: the env's preset, else auto]" in output
    assert CliRunner().invoke(command, []).exit_code == 0
    assert seen["new_knob"] is None and seen["new_flag"] is None and seen["workers"] is None  # not given
    assert CliRunner().invoke(command, ["--new-knob", "3", "--new-flag", "--backend", "ray"]).exit_code == 0
    assert (seen["new_knob"], seen["new_flag"], seen["backend"]) == (3, True, "ray")
    result = CliRunner().invoke(command, ["--new-knob", "x"])
    assert result.exit_code == 2 and "'x' is not a valid integer" in result.output
    for given, taken in (("auto", "auto"), ("AUTO", "auto"), ("8", 8)):  # workers: a count or auto
        assert CliRunner().invoke(command, ["--workers", given]).exit_code == 0 and seen["workers"] == taken
    result = CliRunner().invoke(command, ["--workers", "many"])
    assert result.exit_code == 2 and "'many' is not an integer or auto" in result.output
    with pytest.raises(ValueError, match="already there"):  # one option per field
        config_options("seed")(config_options("seed")(lambda **options: None))


@pytest.mark.slow  # a real command: a subprocess
def test_bad_input_exits_2_as_a_real_command(tmp_path):
    result = run_a3c("train", "--env", "NoSuchEnv-v0", "--run-dir", str(tmp_path / "r"), timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: --env: unknown environment 'NoSuchEnv-v0'")


# A fresh interpreter runs each of these refusals in turn, then says whether torch was imported.
REFUSALS_IN_A_FRESH_PROCESS = """import json, sys
from tests.support.commands import a3c_exit_code
codes = [a3c_exit_code(*args) for args in json.loads(sys.argv[1])]
print(json.dumps({"codes": codes, "torch": "torch" in sys.modules}))
"""


@pytest.mark.slow  # a fresh interpreter: a subprocess
def test_bad_input_is_refused_before_torch_is_imported(tmp_path):
    # Refused in one line, without the seconds of CPU that importing torch takes: it waits for a run that
    # starts.
    refused = [
        ["train", "--env", "NoSuchEnv-v0", "--run-dir", str(tmp_path / "a")],
        ["train", "--env", "CartPole-v1", "--set", "lr=-1", "--run-dir", str(tmp_path / "b")],
        ["train", "--resume", str(tmp_path / "missing")],
    ]
    command = [sys.executable, "-c", REFUSALS_IN_A_FRESH_PROCESS, json.dumps(refused)]
    result = subprocess.run(command, cwd=ROOT, env=a3c_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report == {"codes": [2, 2, 2], "torch": False}, result.stderr[-3000:]


def test_envs_lists_presets_with_targets_and_extras():
    result = CliRunner().invoke(cli, ["envs", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["env_id"]: row for row in map(json.loads, result.output.splitlines())}
    assert rows["CartPole-v1"]["target_return"] == 475.0 and rows["CartPole-v1"]["extra"] is None
    assert rows["ALE/Pong-v5"]["extra"] == "atari" and rows["HalfCheetah-v5"]["extra"] == "mujoco"
    assert rows["Pendulum-v1"]["installed"] is True
    table = CliRunner().invoke(cli, ["envs"])
    assert table.exit_code == 0 and "ALE/Breakout-v5" in table.output and "installed" in table.output


def test_a_checkpoints_config_is_validated_like_a_command_line(capsys, tmp_path):
    # A checkpoint from elsewhere is data: a config value a command line would refuse is refused here too,
    # naming the file and the field, before any env or model is made.
    from a3c.core.spaces import Spaces
    from a3c.rundir.checkpoints import save_checkpoint

    config = Config(env_id="CartPole-v1").to_dict() | {"squash": "sigmoid"}
    save_checkpoint(tmp_path / "bad.pt", {"config": config, "spaces": Spaces((4,), 2).to_dict()})
    line = bad(capsys, "evaluate", str(tmp_path / "bad.pt"))
    assert line == (
        f"error: checkpoint: {str(tmp_path / 'bad.pt')!r} has a config this a3c refuses (squash: 'sigmoid' "
        "is not allowed; expected clip or tanh)"
    )


@pytest.mark.slow  # trains (in this process)
def test_a_run_saved_before_a_bound_existed_still_evaluates_and_resumes_with_the_option(tmp_path):
    # Only what playing needs is checked on load: hang_timeout 2 (below today's bound of 5) belongs to
    # training; a resume validates it with the options given.
    from tests.support.commands import call_a3c_train, train_serial_fixed_length

    run = tmp_path / "run"
    train_serial_fixed_length(run, 400)
    for name in ("last.pt", "best.pt"):
        data = torch.load(run / "checkpoints" / name, weights_only=True)
        data["config"]["hang_timeout"] = 2.0
        torch.save(data, run / "checkpoints" / name)
    assert call_a3c("evaluate", str(run), "--episodes", "2").returncode == 0
    refused = call_a3c("train", "--resume", str(run), "--serial", "--max-steps", "800")
    assert refused.returncode == 2 and refused.stderr.startswith("error: hang_timeout: 2.0 is not allowed")
    resumed = call_a3c_train("--resume", str(run), "--serial", "--max-steps", "800", "--hang-timeout", "30")
    assert resumed.returncode == 0, resumed.stderr
    config = json.loads((run / "config.json").read_text())
    assert (config["hang_timeout"], config["resumes"]) == (30.0, 1)


def test_a_checkpoints_spaces_are_checked_before_its_model_is_built(capsys, tmp_path):
    # Spaces that do not fit the env and weights that fit neither: the spaces are named, not the weights.
    from a3c.core.spaces import Spaces
    from a3c.rundir.checkpoints import save_checkpoint

    config = Config(env_id="CartPole-v1").to_dict()
    weights = {"nonsense": torch.zeros(3)}
    spaces = Spaces((7,), 2).to_dict()
    save_checkpoint(tmp_path / "odd.pt", {"config": config, "spaces": spaces, "model_state": weights})
    line = bad(capsys, "evaluate", str(tmp_path / "odd.pt"))
    assert "was trained for spaces" in line and "CartPole-v1 has" in line, line


@pytest.mark.slow  # trains (in this process)
def test_a_resume_with_a_foreign_csv_header_is_one_line(capsys, tmp_path):
    from tests.support.commands import train_serial_fixed_length

    run = tmp_path / "run"
    train_serial_fixed_length(run, 400)
    (run / "episodes.csv").write_text("step,score\n1,2\n")
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    line = bad(capsys, "train", "--resume", str(run), "--serial")
    assert line.startswith(
        f"error: --resume: {str(run / 'episodes.csv')!r} has the columns ['step', 'score']"
    )
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before  # nothing touched

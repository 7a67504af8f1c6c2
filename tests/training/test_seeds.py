"""The seed list of ``a3c train --seeds`` (a3c.training.seeds): what it accepts, what it refuses in one line,
and the exit code of several runs."""

from __future__ import annotations

import pytest

from a3c.core.errors import BadInput
from a3c.training.seeds import check_seeds, parse_seeds, seed_run_dir, worst_exit


@pytest.mark.parametrize(
    ("text", "seeds"),
    [
        ("0-4", [0, 1, 2, 3, 4]),
        ("0,2,5", [0, 2, 5]),
        ("0-2,7", [0, 1, 2, 7]),
        (" 3 ", [3]),
        ("5-5", [5]),
        ("9,1", [9, 1]),
    ],  # fmt: skip
)
def test_a_seed_list_is_ranges_and_single_seeds_in_the_order_given(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "3-1", "-1", "1,,2", "a", "0-2,2", "1.5", "0-1000000", "0 1"])
def test_a_bad_seed_list_is_one_line_naming_the_option(text):
    with pytest.raises(BadInput) as error:
        parse_seeds(text)
    assert str(error.value).startswith(f"--seeds: {text!r} is not allowed; expected ")
    assert "\n" not in str(error.value)


def test_a_python_seed_list_is_ints():
    assert check_seeds([0, 1, 2]) == [0, 1, 2]
    for bad in ([], [0, 0], [1, -2], [True], ["1"], "0-2"):
        with pytest.raises(BadInput, match=r"^seeds: .* is not allowed; expected "):
            check_seeds(bad)


def test_each_seed_has_its_run_dir_in_the_parent_and_the_worst_exit_code_wins(tmp_path):
    assert seed_run_dir(tmp_path, 3) == tmp_path / "s3"
    assert worst_exit([0, 0, 0]) == 0 and worst_exit([0, 1, 0]) == 1 and worst_exit([0, 1, 130]) == 130
    assert worst_exit([143, 130]) == 143

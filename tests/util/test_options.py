"""Comma-separated option values: one parser, one error per kind of bad list."""

import pytest

from arelu_cli.util.errors import UserError
from arelu_cli.util.options import parse_list, parse_per_name


@pytest.mark.parametrize("text, cast, expected", [("1, 2,,3", int, [1, 2, 3]),
                                                  ("1.5,2", float, [1.5, 2.0]),
                                                  (" a ,b", str, ["a", "b"])])
def test_items_are_stripped_and_cast(text, cast, expected):
    assert parse_list(text, cast, "--x") == expected


def test_bad_and_empty_lists_name_their_option():
    with pytest.raises(UserError, match=r"--seeds takes comma-separated integers, e\.g\. 1,2"):
        parse_list("1,x", int, "--seeds", example="1,2")
    with pytest.raises(UserError, match="--alpha needs at least one value"):
        parse_list(" , ", float, "--alpha")
    assert parse_list("", float, "--tau-sweep", empty_ok=True) == []


def test_one_number_for_every_name_or_name_number_pairs():
    names = ["softmax", "1.5-relu"]
    assert parse_per_name("0.1", names, "--ls") == {"softmax": 0.1, "1.5-relu": 0.1}
    assert parse_per_name(" softmax = 0.1 ", names, "--ls") == {"softmax": 0.1}
    assert parse_per_name("softmax=0.1,1.5-relu=0", names, "--ls") == {"softmax": 0.1,
                                                                       "1.5-relu": 0.0}
    with pytest.raises(UserError, match=r"--ls takes one number or NAME=NUMBER pairs of "
                                        r"softmax, 1\.5-relu .*got 'sparsemax=0\.1'"):
        parse_per_name("softmax=0.1,sparsemax=0.1", names, "--ls")
    with pytest.raises(UserError, match="--ls takes comma-separated numbers"):
        parse_per_name("softmax=x", names, "--ls")
    with pytest.raises(UserError, match="--ls takes one number or NAME=NUMBER"):
        parse_per_name("0.1,0.2", names, "--ls")

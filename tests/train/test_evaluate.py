"""Validation during training: its dev translations are those of ``arelu translate --beam 1``
on the same weights, line for line, and its BLEU is the BLEU ``arelu score`` gives them."""

import pandas as pd
import pytest

from arelu_cli.model import checkpoint
from arelu_cli.decode.bleu import corpus_bleu
from arelu_cli.train.evaluate import validate
from arelu_cli.decode.translate import decode_config, open_checkpoint, translate

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", ["softmax", "1.5-entmax", "1.5-relu"])  # the toy_runs
def test_validation_translates_the_split_as_arelu_translate_does(toy_runs, name):
    decoder = open_checkpoint(toy_runs[name], device="cpu")
    split = decoder.config.data.valid_split
    translated = translate(decoder, decode_config(decoder, beam=1), split=split)
    bleu = corpus_bleu(translated.lines, decoder.data.references(split))
    # the BLEU the run logged while training (on the weights it then saved as best.pt)
    log = pd.read_csv(toy_runs[name] / "log.csv").dropna(subset=["val_bleu"])
    assert checkpoint.load(decoder.path)["step"] == int(log["step"].iloc[-1])
    assert float(log["val_bleu"].iloc[-1]) == bleu
    model, _, transform = checkpoint.load_model(decoder.path)
    model.train()  # as the training loop hands it over
    result = validate(model, decoder.data, transform, decoder.config, decoder.device)
    assert model.training
    assert result.hypotheses == translated.lines and result.bleu == bleu
    assert len(set(result.hypotheses)) > 1  # the models translate, not one line for all
